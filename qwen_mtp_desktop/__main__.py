import sys

from qwen_mtp_desktop.cli import main

sys.exit(main())
