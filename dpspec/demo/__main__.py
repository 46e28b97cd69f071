import sys

from dpspec.demo import main

sys.exit(main())
