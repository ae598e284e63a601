import sys

from gpuatlas.cli import main

sys.exit(main())
