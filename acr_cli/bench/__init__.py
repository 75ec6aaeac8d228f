"""Benchmark replays: CodeRouterBench (OOD176, ID2919) and your own memory, on the live routing code.

Modules: ``spec`` (bench/*.yaml), ``data`` (finding, checking and downloading
the files), ``matrix`` (the task x model result matrix), ``baselines`` (the
paper's reference policies), ``replay`` (the loop with the matrix answering
attempts), ``metrics`` (the paper's figures, computed from memory),
``report`` (table, markdown, CSV, JSON, plot).
"""
