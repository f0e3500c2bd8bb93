"""``python -m usbeam <command>``: ``serve`` runs the shared-memory beamforming server;
``reconstruct`` reconstructs a recording offline on Dask (usbeam.batch, the ``batch`` extra)."""
import sys

from .live.serve import main as serve_main


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m usbeam {serve,reconstruct} [--help] [options]\n"
              "  serve        run a beamforming process behind a shared-memory region (see usbeam.live.serve)\n"
              "  reconstruct  reconstruct a recording chunk by chunk on Dask into Zarr (see usbeam.batch.cli)")
        return 0 if argv else 2
    if argv[0] == "serve":
        return serve_main(argv[1:])
    if argv[0] == "reconstruct":
        try:
            from .batch.cli import main as reconstruct_main
        except ImportError as exc:  # the batch extra is missing: the message names it
            print(f"usbeam reconstruct: {exc}", file=sys.stderr)
            return 2
        return reconstruct_main(argv[1:])
    print(f"usbeam: unknown command {argv[0]!r} (commands: serve, reconstruct)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
