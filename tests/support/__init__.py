"""Helpers the tests share: real local services started and stopped by the tests themselves."""
