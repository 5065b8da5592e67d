"""`python -m bot` is `flagbot`."""

from bot.cli import main

main()
