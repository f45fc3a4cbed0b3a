"""``python -m pentrace`` runs the operator CLI."""

from pentrace.cli.app import main

if __name__ == "__main__":
    main()
