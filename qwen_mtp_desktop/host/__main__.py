import sys

from qwen_mtp_desktop.host.engine_host import main

sys.exit(main())
