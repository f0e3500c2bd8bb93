"""``python -m usbeam <command>``: ``serve`` runs the shared-memory beamforming server."""
import sys

from .live.serve import main as serve_main


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m usbeam serve [--help] [options]\n"
              "  serve   run a beamforming process behind a shared-memory region (see usbeam.live.serve)")
        return 0 if argv else 2
    if argv[0] == "serve":
        return serve_main(argv[1:])
    print(f"usbeam: unknown command {argv[0]!r} (commands: serve)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
