"""What the test folders share: where things are, and one runner for the ``tvmrt`` command.

``tests`` is on ``sys.path`` (``pythonpath`` in pyproject.toml), so a test imports these as
``from support.paths import ARTIFACTS`` and ``from support.cli import tvmrt``.
"""
