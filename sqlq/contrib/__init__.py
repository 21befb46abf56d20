"""Integrations of sqlq with the web frameworks its users already run (Flask, Django)."""
