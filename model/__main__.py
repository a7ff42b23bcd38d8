"""``python -m model`` runs the pdplan CLI."""

import sys

from model.cli import main

sys.exit(main())
