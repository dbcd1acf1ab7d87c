"""``python -m leakaudit``: the command line."""

from leakaudit.cli import main_entry

if __name__ == "__main__":
    main_entry()
