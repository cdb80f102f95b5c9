"""``python3 -m didnmf``: the package's own commands.

``python3 -m didnmf convert SRC DST [--layer NAME] [--block-rows N] [--compress] [--overwrite]``
converts an ``.h5ad`` or a 10x ``.h5`` file into a didnmf block store that the ``didnmf``
command reads (see :func:`didnmf._convert.convert`). Exit status 0 on success, 2 for a bad
input or usage (the message names the file and the place), 1 for any other failure, 130 on
an interrupt, 143 on SIGTERM, 129 on SIGHUP (in all three the partial output is removed).
"""

import argparse
import signal
import sys
import threading

EXIT_USAGE = 2


def _parser():
    p = argparse.ArgumentParser(
        prog="python3 -m didnmf",
        description="didnmf's Python-side commands.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    c = sub.add_parser(
        "convert",
        help="convert an .h5ad or 10x .h5 file into a didnmf block store",
        description=(
            "Convert an AnnData .h5ad (X or a layer; dense, CSR or CSC) or a 10x Cell Ranger "
            "v3 .h5 into a didnmf block store (a directory of CSR .npz or dense .npy row "
            "blocks with manifest.json, features.tsv and samples.tsv), block by block, "
            "without loading the matrix. Samples are rows: cells."))
    c.add_argument("src", metavar="SRC", help="the .h5ad or 10x .h5 file")
    c.add_argument("dst", metavar="DST", help="the store directory to create, e.g. NAME.didnmf")
    c.add_argument("--layer", metavar="NAME", default=None,
                   help="convert this layer of an .h5ad instead of X")
    c.add_argument("--block-rows", metavar="N", type=int, default=None,
                   help="rows (samples) per block (default: cut blocks at about 4Mi "
                        "stored values, at most 65536 rows)")
    c.add_argument("--compress", action="store_true",
                   help="write the sparse blocks compressed (smaller, slower to read)")
    c.add_argument("--overwrite", action="store_true",
                   help="replace DST if it is an existing didnmf store")
    c.add_argument("--allow-unwritten", action="store_true",
                   help="convert a matrix that the file declares but mostly never wrote "
                        "(read as its fill value); refused by default")
    c.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    return p


class _Signalled(BaseException):
    """Raised by the SIGTERM/SIGHUP handlers so that the conversion's cleanup (its ``except
    BaseException``, which removes the temporary output) runs, as on Ctrl-C."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


_CAUGHT = tuple(getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n))


def _on_signal(signum, frame):
    # Further signals are ignored while the cleanup runs (a second SIGTERM would interrupt
    # the removal of the temporary directory); SIGKILL still ends the process.
    for s in _CAUGHT:
        signal.signal(s, signal.SIG_IGN)
    raise _Signalled(signum)


def _catch_signals():
    """Install the handlers (main thread only); return the previous ones."""
    if threading.current_thread() is not threading.main_thread():
        return {}
    old = {}
    for s in _CAUGHT:
        prev = signal.getsignal(s)
        if prev == signal.SIG_IGN:  # e.g. nohup: keep ignoring it
            continue
        old[s] = signal.signal(s, _on_signal)
    return old


def _restore_signals(old):
    for s, prev in old.items():
        signal.signal(s, prev if prev is not None else signal.SIG_DFL)


def main(argv=None):
    """Run ``python3 -m didnmf`` with ``argv`` (default ``sys.argv[1:]``); return the exit
    status."""
    p = _parser()
    args = p.parse_args(argv)
    if args.command != "convert":
        p.print_help(sys.stderr)
        return EXIT_USAGE
    from ._convert import convert
    old = _catch_signals()
    try:
        m = convert(args.src, args.dst, layer=args.layer, block_rows=args.block_rows,
                    compress=args.compress, overwrite=args.overwrite,
                    allow_unwritten=args.allow_unwritten)
    except KeyboardInterrupt:
        print("didnmf convert: interrupted; nothing written", file=sys.stderr)
        return 130
    except _Signalled as e:
        print(f"didnmf convert: {signal.Signals(e.signum).name}; nothing written",
              file=sys.stderr)
        return 128 + e.signum
    except (ValueError, FileNotFoundError, FileExistsError) as e:
        print(f"didnmf convert: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, ImportError) as e:
        print(f"didnmf convert: {e}", file=sys.stderr)
        return 1
    finally:
        _restore_signals(old)
    if not args.quiet:
        n, m_cols = m["shape"]
        kind = "dense" if m["blocks"] and m["blocks"][0]["file"].endswith(".npy") else "CSR"
        print(f"{args.dst}: {n} samples x {m_cols} features, {m['dtype']}, "
              f"{len(m['blocks'])} {kind} blocks (from {m['source']}, {m['layer']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
