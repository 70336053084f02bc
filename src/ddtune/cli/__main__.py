"""`python -m ddtune.cli ...`: the same as the `ddtune` command."""

import sys

from ddtune.cli import main

sys.exit(main())
