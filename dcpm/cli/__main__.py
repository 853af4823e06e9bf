"""`python -m dcpm.cli`: the same as the `dcpm` command (`dcpm.cli.main.main`)."""

from dcpm.cli.main import main

main()
