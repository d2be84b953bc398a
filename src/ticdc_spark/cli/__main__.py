"""``python -m ticdc_spark.cli``: the ``ticdc-spark`` command."""

import sys

from ticdc_spark.cli.main import main

sys.exit(main())
