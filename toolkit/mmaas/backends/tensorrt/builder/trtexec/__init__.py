"""trtexec: the argument vector of one engine build (argv), shape specs (shapes) and its log
parser (log)."""
