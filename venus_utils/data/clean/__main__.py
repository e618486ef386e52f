"""``python -m venus_utils.data.clean``: the cleaner's command line (:func:`venus_utils.data.clean.main`)."""

import sys

from . import main

sys.exit(main())
