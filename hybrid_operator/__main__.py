"""`python -m hybrid_operator run ...`: the same as the hybrid-operator console script."""

import sys

from hybrid_operator.cli import main

sys.exit(main())
