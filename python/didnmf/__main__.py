"""``python3 -m didnmf``: the package's own commands.

``python3 -m didnmf convert SRC DST [--layer NAME] [--block-rows N] [--compress] [--overwrite]``
converts an ``.h5ad`` or a 10x ``.h5`` file into a didnmf block store that the ``didnmf``
command reads (see :func:`didnmf._convert.convert`). Exit status 0 on success, 2 for a bad
input or usage (the message names the file and the place), 1 for any other failure, 130 on
an interrupt (the partial output is removed).
"""

import argparse
import sys

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
    c.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    return p


def main(argv=None):
    """Run ``python3 -m didnmf`` with ``argv`` (default ``sys.argv[1:]``); return the exit
    status."""
    p = _parser()
    args = p.parse_args(argv)
    if args.command != "convert":
        p.print_help(sys.stderr)
        return EXIT_USAGE
    from ._convert import convert
    try:
        m = convert(args.src, args.dst, layer=args.layer, block_rows=args.block_rows,
                    compress=args.compress, overwrite=args.overwrite)
    except KeyboardInterrupt:
        print("didnmf convert: interrupted; nothing written", file=sys.stderr)
        return 130
    except (ValueError, FileNotFoundError, FileExistsError) as e:
        print(f"didnmf convert: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (OSError, ImportError) as e:
        print(f"didnmf convert: {e}", file=sys.stderr)
        return 1
    if not args.quiet:
        n, m_cols = m["shape"]
        kind = "dense" if m["blocks"] and m["blocks"][0]["file"].endswith(".npy") else "CSR"
        print(f"{args.dst}: {n} samples x {m_cols} features, {m['dtype']}, "
              f"{len(m['blocks'])} {kind} blocks (from {m['source']}, {m['layer']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
