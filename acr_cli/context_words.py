"""The words and patterns the kind rules read a request by (acr_cli.context): data, apart from the logic
that weighs them, so that tuning a rule is an edit here and ``python bench/classifier.py`` measures it."""

from __future__ import annotations

import re

# How a request's kind is read (measured on hand-written requests: bench/classifier.py). Three kinds of
# evidence add up per kind, and the highest total wins (ties: the earlier kind in KIND_WORDS):
#
# * KIND_WORDS: words and phrases that name a kind of work, anywhere in the request. One line is one rule:
#   (weight, phrases), the phrases separated by "|", "{a,b}" spelling alternatives ("crash{,es,ed}");
#   case, punctuation and hyphens do not matter ("fine-tune" is "fine tune"). A rule counts once.
# * KIND_RULES: what words cannot say (a gap between two words, numbers, line starts), as regexes.
# * the shape of the request: the verb it opens with (once "please", "can you"... are taken off), pasted
#   error output, a question, a description of what happens that asks for nothing, many files or layers.
KIND_WORDS: dict[str, list[tuple[float, str]]] = {
    "test_generation": [
        (3, "{unit,integration,regression,snapshot,end to end,e2e,smoke,golden,contract,property based,"
            "table driven,parametrized,parametrised,jest,pytest,rspec,mocha,vitest,junit,playwright,cypress,"
            "selenium,go} {test,tests,spec,specs,test cases}"),
        (2, "{test,tests,specs} {for,covering,around,of}"),
        (3, "{no,zero,without,lack,lacks,missing} {,unit ,integration }{test,tests} | untested"),
        (1.5, "test cases | test coverage | test suite | test plan | coverage | fixture | fixtures | mock | mocks | "
              "mocking | mocked | stub | stubs | fuzz | fuzzing | fuzzer | fuzz target | hypothesis | "
              "testcontainers | xfail | assertion | assertions | edge cases | corner cases | happy path"),
    ],
    "docs": [
        (3, "readme | docstring | docstrings | documentation | docs | changelog | release notes | contributing | "
            "manpage | man page | jsdoc | javadoc | rustdoc | godoc | sphinx | mkdocs | docusaurus | faq | "
            "api reference | user guide | {getting started,migration,install,installation,upgrade,style} guide | "
            "tutorial | wiki | openapi | swagger | adr | adrs | runbook | runbooks | playbook | playbooks | howto | "
            "how to | help {text,texts,output,outputs,message,messages}"),
        (2, "documenting | documented | document {the,how,why,what,when,which,our,all,each,every,this,these,its,"
            "it,them}"),
        (1.5, "comment | comments | typo | typos | spelling | grammar | usage example | usage examples | badge | "
              "badges | diagram | writeup | write up | write down | notes"),
        (2, "in {,the ,a }{readme,docs,docstring,module docstring,comment,comments,changelog,wiki,guide}"),
    ],
    "bug_fix": [
        (2, "fix | fixes | fixed | fixing"), (2, "bug | bugs | buggy"),
        (2, "crash | crashes | crashed | crashing | broken | segfault | segfaults | seg fault | panic | panics | "
            "panicked | hang | hangs | hanging | freezes | freezing | deadlock | deadlocks | race | "
            "race condition | memory leak | leak | leaks | leaking | oom | out of memory | keeps growing"),
        (1, "error | errors | exception | exceptions | traceback | stacktrace | stack trace | wrong | incorrect | "
            "off by one | mojibake | garbled | corrupt | corrupted | raises | throws"),
        (1.5, "fail | fails | failing | failed | failure | flaky | times out | blow up | blows up"),
        (1.5, "does nothing | nothing happens | has no effect | is ignored | gets ignored | silently | "
              "one day off | off by | twice | sometimes | randomly | intermittent | intermittently | every other"),
        (1, "drop | drops | lose | loses | skip | skips | swallow | swallows | truncates | truncated | stays | "
            "stuck | spins"),
        (1, "{when,whenever,if} {i,you,we,a user,users,someone}"),
        (2, "{since,after} {,the }{,last ,latest ,recent }{release,upgrade,update,deploy,version} | "
            "after {upgrading,bumping,updating} | used to work | used to be"),
        (1.5, "complain | complains | complained | complaining | complaint | complaints | users report | reported"),
        (1, "repro | repros | reproduce | reproduction | steps to reproduce"),
    ],
    "refactor": [
        (3, "refactor | refactors | refactored | refactoring | refactorings"),
        (2, "cleanup | clean up | tidy | tidy up | simplify | restructure | reorganise | reorganize | deduplicate | "
            "extract | decouple | untangle | modularise | modularize | inline | consolidate"),
        (2, "rename | renamed | renames | renaming"),
        (3, "{no,without,without any,keep the,keeping the,same} {behaviour,behavior}{, change} | "
            "{behaviour,behavior} {,the }same | {nothing,no one,user,users} should {look,notice,see,behave} | "
            "without changing"),
        (3, "type hints | type annotations | typing"),
        (1.5, "mypy | lint | linter | linting | pylint | flake8 | ruff | eslint | clippy"),
        (1.5, "fstring | fstrings | f string | f strings | dataclass | dataclasses | async await | "
              "context manager | named constants | magic numbers | dead code | unused | immutable | mutate | "
              "mutates | mutated | mutating | mutation | mutations | mutable | early return | early returns | "
              "guard clauses | dispatch dict | dispatch table | composition | inheritance | dependency injection | "
              "interface | interfaces | global variable | global variables | global state | nested | duplicated | "
              "duplication | copy paste | copy pasted | copypaste | boilerplate | god class | god object | "
              "too long | too big | too much | readable | readability | maintainable | maintainability | "
              "hard to read | hard to follow | impossible to follow | out of hand | messy | spaghetti | "
              "convoluted | smaller {functions,methods,modules,steps,pieces,classes} | helper | generic | "
              "almost identical"),
        (1, "instead of"),
    ],
    "explain": [
        (2, "explain | describe | walk through | walk me through | tell me | overview | summarise | summarize | "
            "understand | clarify | what does | how does | how do | why does | why do | why is | why are | how is | "
            "how are | what happens | what's the {point,purpose,difference,role} | difference between | "
            "purpose of | is it safe | i'm new | new here"),
        (3, "{need,want,looking for,asking for} {advice,your advice,an opinion,your opinion,a critique,your critique} | "
            "in prose | not code | {don't,do not} {understand,get it} | help understanding | no code changes | "
            "{don't,do not} write {code,any code,the code,an implementation,a fix} | "
            "not asking {for a fix,for code,for an implementation,you to implement,you to write}"),
    ],
    "data_science": [
        (3, "pandas | numpy | scipy | sklearn | scikit learn | matplotlib | seaborn | plotly | jupyter | notebook | "
            "notebooks | ipynb | xgboost | lightgbm | catboost | pytorch | torch | tensorflow | keras | huggingface | "
            "hugging face | transformers | prophet | statsmodels | optuna | polars | dataframe | dataframes | "
            "datetime64 | dtype | dtypes"),
        (2.5, "fine tune | fine tuned | fine tunes | fine tuning | finetune | finetuned | finetuning | classifier | "
              "random forest | logistic regression | linear regression | kmeans | k means | clustering | cluster | "
              "embedding | embeddings | tfidf | tf idf | sentiment | overfit | overfits | overfitting | overfitted | "
              "underfit | underfitting | regularise | regularize | regularisation | regularization | "
              "regularised | regularized | early stopping | hyperparameter | hyperparameters | cross validation | "
              "train val | train test | train val test | {val,validation} {set,loss,acc,accuracy} | "
              "confusion matrix | roc | auc | feature engineering | forecast | forecasts | forecasting | "
              "forecasted | anomaly | anomalies | anomalous | isolation forest | outlier | outliers | impute | "
              "imputed | imputes | imputing | imputation | correlation | correlations | heatmap | histogram | "
              "residuals | cohort | cohorts | retention | a b test | significant | significance | significantly | "
              "rolling {average,mean,window} | moving average | standard deviation | standard deviations | "
              "std dev | std devs | percentile | percentiles | time series | pivot | vectorise | vectorize | "
              "resample | resampled | resamples | resampling | iqr | boxplot | boxplots | box plot | box plots | "
              "scatterplot | scatterplots | scatter plot | scatter plots | cosine similarity | shap | spreadsheet | "
              "spreadsheets | excel | ohlc | epoch | epochs | learning rate | dropout | loss | eda | exploratory"),
        (2, "plot | plots | plotted | plotting | chart | charts | graph of | graphs of"),
        (1, "train | training | trained | trains | model | predict | predicts | predicted | predicting | prediction | "
            "predictions | predictive | labelled | labeled | accuracy | precision | recall | f1 | distribution | "
            "distributions | statistic | statistics | statistical | mean | median | csv | parquet | dataset | "
            "datasets | column | columns | rows | groupby | group by | aggregate | aggregates | aggregated | "
            "aggregating | aggregation | dashboard | metrics | batch size"),
        (1.5, "{survey,churn,sales,sensor,experiment,training,census,tabular} {data,readings,logs}"),
    ],
    "algorithm": [
        (3, "algorithm | algorithms | algorithmic"),
        (3, "time complexity | space complexity | quadratic | linear time | logarithmic | n log n | big o | "
            "asymptotic | asymptotically"),
        (3, "lru | lfu | trie | tries | heap | heaps | priority queue | union find | disjoint set | segment tree | "
            "fenwick | interval tree | btree | b tree | red black | avl | skiplist | skip list | bloom filter | "
            "linked list | binary search | binary tree | binary heap | bst | hashmap | hash map | ring buffer | "
            "circular buffer | adjacency | dag | graph traversal | shortest path | spanning tree | dijkstra | a* | "
            "bfs | dfs | breadth first | depth first | topological sort | topologically sort | topological sorting | "
            "topologically sorted | kruskal | prim | bellman | floyd | knapsack | dynamic programming | memoise | "
            "memoize | memoised | memoized | memoisation | memoization | memoizing | memoising | backtracking | "
            "divide and conquer | quickselect | quick select | quicksort | quick sort | mergesort | merge sort | "
            "heapsort | heap sort | radix sort | two pointers | sliding window | edit distance | levenshtein | "
            "longest {common,increasing,palindromic} | palindrome | palindromes | palindromic | permutation | "
            "permutations | subsets | consistent hashing | reservoir sampling | token bucket | leaky bucket | "
            "myers | bitmask | sieve | prime | primes | fibonacci | fib | gcd | lcm | nqueens | n queens | sudoku | "
            "anagram | anagrams | subarray | subsequence | substring | {traveling,travelling} salesman | tsp | "
            "island | islands | {top,k} {,k ,most ,least }frequent"),
        (1.5, "graph | tree | matrix | grid | interval | intervals | in place | without extra {memory,space} | "
              "constant {memory,space} | cycle | cycles | greedy | median | kth | k sorted | merge k | "
              "minimum number | maximum number | count the ways | sum to | optimal | heuristic | pathfinding"),
        (1, "too slow | faster | speed up | optimise | optimize | take forever | takes forever | scale badly | "
            "scales badly | scale poorly | scales poorly | efficient | efficiently | efficiency"),
        (2, "given {a,an,two} {list,array,string,graph,tree,matrix,set,number,integer,sequence} | "
            "write a function {that,to}"),
    ],
    "multi_file": [
        (3, "{across,throughout} {,the ,all ,our ,every }{,whole ,entire }{codebase,code base,project,repo,"
            "repository,app,application,frontend,backend,services,modules,files,packages,stack,monorepo}"),
        (3, "everywhere"),
        (3, "{whole,entire} {app,codebase,code base,project,repo,repository,code,test suite,frontend,backend,"
            "monorepo}"),
        (3, "one {package,module,file,service} at a time | {package,module,file,service} by "
            "{package,module,file,service}"),
        (2, "{update,fix,change} {,all }{,the }{imports,call sites,callsites,callers,usages,references}"),
        (2, "{several,multiple,many,three,four,all three} {services,packages,modules,files,repos}"),
        (1.5, "monolith | microservices | i18n | internationalise | internationalize | internationalisation | "
              "internationalization | internationalising | internationalizing | localisation | localization"),
        (2, "{spread,scattered} {over,across,around,throughout}"),
    ],
    "feature": [
        (1, "add | implement | support | allow | introduce | expose | enable | new | build | create | "
            "let {users,admins,people,me,us}"),
        (2, "feature request | proposal | would be {nice,great,good,cool,useful,handy} | it would be {nice,great} | "
            "we need | i want | i'd like | could we {get,have} | should be able to | no way to | there's no way | "
            "a way to | would help | {ask,asking,asked} for | we should | "
            "should {,also }{let,allow,support,suggest,offer,accept,take,warn}"),
        (1, "option | flag | endpoint | button | toggle | setting | command | subcommand"),
    ],
}

# kind -> [(regex, weight)], searched case-insensitively; each counts once, as a KIND_WORDS line does.
KIND_RULES: dict[str, list[tuple[str, float]]] = {
    "test_generation": [
        (r"\b(write|add|create|generate|need|want|more|some|missing|new|extra)\b[^.\n]{0,40}\b(tests?|specs|test "
         r"cases)\b(?! (still |now |also )?(fail|pass|break|crash|hang|time|run|is|are|was|were))", 3),
        (r"^[^\w\n]*(tests?|specs)\b", 2)],
    "bug_fix": [
        (r"(?<!linear )(?<!logistic )(?<!ridge )(?<!lasso )\bregression\b(?! (tests?|model|line|analysis))", 2),
        (r"\b(expected|should)\b[^.\n]{0,60}\b(but|got|instead)\b", 1.5),
        (r"^[^\S\n]*(steps|expected|actual|observed)( behaviou?r| result)?:", 2),
        (r"\b(doesn't|does not|don't|didn't|won't|isn't|aren't|can't|cannot|no longer|stopped|never) "
         r"(work|respond|react|load|save|show|stop|evict|start|compile|build|render|open|close|update|get|set|"
         r"return|trigger|fire|apply|connect)", 2)],
    "algorithm": [
        (r"\bO\((1|n|log ?n|n log ?n|n\^?2|n\*\*2|k|m|v ?\+ ?e|n ?\* ?m)\)", 3),
        (r"\bbalanced\b.{0,20}\b(brackets|parenthes[ie]s)|\b(brackets|parenthes[ie]s)\b.{0,20}\bbalanced|"
         r"\bserializ\w* .{0,20}tree", 3)],
    "multi_file": [
        (r"\b(every|each|all( the| of the| our)?|(the )?remaining|(all )?(the )?other)\s+(\S+\s+)?(modules?|files?|"
         r"packages?|services?|handlers?|call ?sites?|callers?|endpoints?|tables?|quer(y|ies)|components?|"
         r"templates?|controllers?|routes?|views?)\b", 2.5),
        (r"\b(upgrade|migrate|bump|move)\b[^.\n]{0,30}\b(from )?[a-z][\w.-]* \d[\d.]* to \d", 3),
        (r"\b(migrate|port|move|switch|convert)\b[^.\n]{0,50}\b(from|to)\b", 1)],
}

# The verb a request opens with says most about the work. kind -> [(weight, verbs, words)]: the opening
# sentence starts with one of ``verbs`` and, when ``words`` is given, names one of them within eight words.
HEAD_WORDS: dict[str, list[tuple[float, str, str]]] = {
    "test_generation": [(3, "write | add | create | generate | need | want | get", "test | tests | specs | test cases"),
                        (3, "test {that,whether,the,every,each,all,it}", "")],
    "docs": [(3, "write | add | update | correct | improve | expand | fill in | translate | rewrite | proofread",
              "doc | docs | readme | docstring | docstrings | comment | comments | changelog | guide | notes | "
              "manpage | man page | faq | jsdoc | rustdoc | documentation | description | descriptions | example | "
              "examples | spec | tutorial"),
             (3, "document", "")],
    "bug_fix": [(3, "fix | debug | investigate | diagnose | troubleshoot | look into | figure out | find out | "
                    "track down | repair | resolve", "")],
    "refactor": [(2, "refactor | rename | extract | split | convert | replace | switch | turn | get rid of | tidy | "
                     "cleanup | clean up | simplify | inline | merge | consolidate | unify | separate | invert | "
                     "decouple | rewrite | reorganise | reorganize | restructure", ""),
                 (2, "break", "up"), (2, "pull", "into"), (2, "move", "into | out of | to"),
                 (2, "make", "less nested | more nested | less readable | more readable | more testable")],
    "explain": [(3, "explain | describe | walk through | walk me through | tell me | give me an overview | "
                    "summarise | summarize | help me understand", "")],
    "data_science": [(2, "plot | train | fit | cluster | forecast | impute | pivot | visualise | visualize | "
                         "analyse | analyze | predict | fine tune", ""),
                     (2, "load", "csv | parquet | xls | xlsx")],
    "algorithm": [(1, "implement | write | code | solve", "function | algorithm")],
    "feature": [(1.5, "add | implement | support | allow | introduce | build | create | let | make | give | expose | "
                      "enable | offer | provide", "")],
}

# Verbs that open a request for work ("search the logs..."), unless the next word says the first was a noun
# ("search returns nothing"): a description of what happens that asks for nothing is most often a bug report.
IMPERATIVES = set("""
add implement make fix write create build update change remove delete drop rename refactor move convert replace split
break extract pull put set use let allow support give show display send handle check compute calculate find count
detect parse load read train fit plot draw merge compare run test document explain describe tell walk summarise
summarize list generate get bump upgrade migrate port switch turn clean tidy simplify optimise optimize speed rewrite
resample embed cluster forecast impute pivot serialize deserialize solve return sort search translate integrate expose
enable disable introduce deprecate apply standardise standardize inline wrap cache validate sanitize log track store
save keep reduce increase raise lower limit avoid stop prevent ensure improve investigate debug look figure reproduce
mock cover try help include exclude export import install configure deploy scrape fetch call pass throw catch wire hook
rotate insert append format lint type annotate visualise visualize analyse analyze predict classify tokenise tokenize
fine tune go do start finish restore revert rollback retry batch paginate memoise memoize vectorise vectorize
normalise normalize dedupe benchmark profile measure record emit warn notify email post accept reject ignore skip print
render decouple invert separate consolidate unify thread propagate remember resize upload download sign block open
close mark flag tag bring fill correct proofread spell pin unpin vendor publish release ship pick choose select please
pls""".split())
FINITE = set("""
is are was were isn't aren't wasn't has have had does doesn't did didn't gets got goes went keeps kept shows returns
gives puts runs ran takes took makes made sends sent writes wrote prints links resets overwrites drops loses skips
breaks stops starts appears seems happens says throws raises crashes hangs fails works comes turns ends uses loads saves
opens closes counts displays renders reads misses ignores stays can't cannot won't""".split())
DESIRE = ("would | could we | can we | want | wish | nice | feature | proposal | need | ask for | asking for | "
          "asked for | a way to | option to | ability to")
LAYERS = ("models | migrations | serializers | urls | routes | views | templates | components | handlers | "
          "controllers | services | packages | modules | clients | servers | workers | tests | docs | frontend | "
          "backend | web app | mobile | mobile app | mobile api | api | sdk | cli | db | database | schema | schemas")

# Pasted error output (case-sensitive, line by line): a request that carries it is about something broken.
TRACE = re.compile(
    r"Traceback \(most recent call last\)|^[^\S\n]+at [\w.$<>/]+ ?\(.*:\d+|\bpanicked at\b|^panic: |goroutine \d+ \[|"
    r"^[^\S\n]*[\w.]*(Error|Exception)\b[\w.]*: |\b[A-Z]\w*(Error|Exception): |\berrors\.[A-Z]\w+: |^FAILED |^E[^\S\n]+assert|"
    r"Segmentation fault|core dumped|is not recognized as an internal or external command|npm ERR!|"
    r"error\[E\d{4}\]|^error: |Uncaught \w+", re.M)
