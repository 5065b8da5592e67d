"""The stand-in, a real slack_sdk client and a tiny Bolt bot for these tests (tests/support/standin_fixtures.py)."""

from tests.support.standin_fixtures import BoltBot, bolt_bot, client, standin

__all__ = ["BoltBot", "bolt_bot", "client", "standin"]
