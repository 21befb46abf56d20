"""``python -m sqlq``: the same command as the ``sqlq`` console script."""

from sqlq.cli import main

if __name__ == "__main__":
    main()
