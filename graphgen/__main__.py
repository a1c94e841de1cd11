import sys

from graphgen.cli import main

sys.exit(main())
