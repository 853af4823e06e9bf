"""`python -m dcpm`: the same as the `dcpm` command."""

from dcpm.cli.main import main

main()
