"""`python -m bot` is `flagbot`."""

from bot.main import main

main()
