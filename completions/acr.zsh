#compdef acr

_acr_completion() {
  eval $(env _TYPER_COMPLETE_ARGS="${words[1,$CURRENT]}" _ACR_COMPLETE=complete_zsh acr)
}

compdef _acr_completion acr
