#!/usr/bin/env python
from dpspec.cli.main import main

raise SystemExit(main())
