"""The estimator's parameters: checked as scikit-learn checks them, turned into didnmf flags.

``check_params`` raises a ``ValueError`` naming the parameter and what it takes;
``model_flags`` and ``run_flags`` map the checked parameters onto the command's flags
(``factorize -h``, ``sweep -h``, ``transform -h``).
"""

import numbers
import re

import numpy as np

__all__ = [
    "ALGOS",
    "INITS",
    "check_params",
    "beta_value",
    "loss_flag",
    "algo_of",
    "resolve_init",
    "resolve_seed",
    "model_flags",
    "run_flags",
    "duration_flag",
    "accel_flag",
    "DEFAULT_ACCEL",
]

# didnmf's algorithms (factorize --algo) and initialisations (--init).
ALGOS = ("did", "dbcd", "bcd", "hals", "mu", "anls", "admm", "dadmm", "hpc-anls")
INITS = ("random", "nndsvd", "nndsvda", "kmeans", "custom")
SOLVERS = {"cd": "did", "mu": "mu"}
# accel's default: plain DID, as the command's (jobspec.DefaultAccel); the command decides
# what a setting means and refuses a bad one, accel_flag only gives it its form.
DEFAULT_ACCEL = "off"
ACCEL_NAMES = ("off", "auto", "x")
MAX_ACCEL_SWEEPS = 100
# accel's counts and eps as text: what Go's strconv.Atoi and a decimal ParseFloat read.
_COUNT = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DECIMAL = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)
BETA_NAMES = {"frobenius": 2.0, "kullback-leibler": 1.0, "itakura-saito": 0.0}


def _is_int(v):
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_real(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _bad(name, value, wants, owner="NMF"):
    return ValueError(f"The {name!r} parameter of {owner} must be {wants}. Got {value!r} instead.")


def _check_common(p, owner):
    """The parameters the estimator and sweep share (p: a dict of them)."""
    if p["init"] is not None and p["init"] not in INITS:
        if p["init"] == "nndsvdar":
            raise ValueError(
                "init='nndsvdar' is not offered by didnmf: use init='nndsvda' (NNDSVD with its "
                "zeros filled with the mean of X, where nndsvdar fills them with small random "
                "values) or init='random'"
            )
        raise _bad("init", p["init"], f"None or one of {', '.join(map(repr, INITS))}", owner)
    bl = p["beta_loss"]
    if not (bl in BETA_NAMES or _is_real(bl)):
        raise _bad(
            "beta_loss", bl, "a float or one of 'frobenius', 'kullback-leibler', 'itakura-saito'", owner
        )
    if not (_is_real(p["tol"]) and p["tol"] >= 0):
        raise _bad("tol", p["tol"], "a float in the range [0, inf)", owner)
    if not (_is_int(p["max_iter"]) and p["max_iter"] >= 1):
        raise _bad("max_iter", p["max_iter"], "an int in the range [1, inf)", owner)
    if not (_is_real(p["alpha_W"]) and p["alpha_W"] >= 0):
        raise _bad("alpha_W", p["alpha_W"], "a float in the range [0, inf)", owner)
    ah = p["alpha_H"]
    if not (ah == "same" or (_is_real(ah) and ah >= 0)):
        raise _bad("alpha_H", ah, "a float in the range [0, inf) or 'same'", owner)
    if not (_is_real(p["l1_ratio"]) and 0 <= p["l1_ratio"] <= 1):
        raise _bad("l1_ratio", p["l1_ratio"], "a float in the range [0, 1]", owner)
    if not ((_is_int(p["verbose"]) or isinstance(p["verbose"], bool)) and p["verbose"] >= 0):
        raise _bad("verbose", p["verbose"], "an int >= 0 or a bool", owner)
    if p["algo"] is not None and p["algo"] not in ALGOS:
        raise _bad("algo", p["algo"], f"None or one of {', '.join(map(repr, ALGOS))}", owner)
    if not (_is_int(p["shards"]) and p["shards"] >= 1):
        raise _bad("shards", p["shards"], "an int in the range [1, inf)", owner)
    if not (_is_int(p["nodes"]) and p["nodes"] >= 0):
        raise _bad("nodes", p["nodes"], "an int in the range [0, inf)", owner)
    if p["threads"] is not None and not (_is_int(p["threads"]) and p["threads"] >= 0):
        raise _bad("threads", p["threads"], "None or an int in the range [0, inf)", owner)
    duration_flag(p["time_limit"], owner)
    if p["missing"] not in (None, "nan"):
        raise _bad("missing", p["missing"], "None or 'nan'", owner)
    accel_flag(p["accel"], owner)
    if p.get("value_transform", "none") not in ("none", "sqrt"):
        raise _bad("value_transform", p["value_transform"], "'none' or 'sqrt'", owner)
    tf = p["test_fraction"]
    if not (_is_real(tf) and 0 <= tf < 1):
        raise _bad("test_fraction", tf, "a float in the range [0, 1)", owner)
    if p["cluster"] is not None and not (isinstance(p["cluster"], str) and p["cluster"]):
        raise _bad("cluster", p["cluster"], "None or 'HOST:PORT' (comma-separated for several)", owner)
    if p["ingest"] not in (None, "shared", "stream"):
        raise _bad("ingest", p["ingest"], "None, 'shared' or 'stream'", owner)
    if p["nodes"] and p["cluster"]:
        raise ValueError(f"{owner}: nodes (in-process actor systems) and cluster (a running cluster) exclude each other")
    for name in ("secret_file", "tls_ca", "tls_cert", "tls_key", "client_bind"):
        if p[name] is not None and not isinstance(p[name], (str, bytes)) and not hasattr(p[name], "__fspath__"):
            raise _bad(name, p[name], "None or a path", owner)
    if not isinstance(p["insecure"], (bool, np.bool_)):
        raise _bad("insecure", p["insecure"], "a bool", owner)
    beta = beta_value(bl)
    algo = algo_of(p)
    if beta != 2 and algo != "mu":
        if p["algo"] is None:
            raise ValueError(
                f"Invalid beta_loss parameter: solver {p['solver']!r} does not handle "
                f"beta_loss = {bl!r} (use solver='mu')"
            )
        raise ValueError(
            f"Invalid beta_loss parameter: algo {algo!r} does not handle beta_loss = {bl!r}: "
            "only algo='mu' (multiplicative updates) minimises a beta-divergence other than Frobenius"
        )


def check_params(est, owner="NMF"):
    """Check an NMF estimator's parameters; raise ValueError naming the first bad one (and
    ``owner``, the estimator or function they were given to)."""
    p = est.get_params()
    nc = p["n_components"]
    if nc is not None and not (_is_int(nc) and nc >= 1):
        raise _bad("n_components", nc, "an int in the range [1, inf) or None", owner)
    if p["solver"] not in SOLVERS:
        raise _bad("solver", p["solver"], "one of 'cd', 'mu'", owner)
    rs = p["random_state"]
    if not (rs is None or _is_int(rs) or isinstance(rs, np.random.RandomState)):
        raise _bad("random_state", rs, "an int, a numpy.random.RandomState instance or None", owner)
    if _is_int(rs) and not 0 <= rs < 2**64:
        raise _bad("random_state", rs, "an int in the range [0, 2**64) (the seed)", owner)
    _check_common(p, owner)
    return p


def beta_value(beta_loss):
    """beta_loss as a float (scikit-learn's _beta_loss_to_float)."""
    if isinstance(beta_loss, str):
        return BETA_NAMES[beta_loss]
    return float(beta_loss)


def loss_flag(beta_loss):
    """didnmf's --loss value for a beta_loss."""
    beta = beta_value(beta_loss)
    if beta == 2:
        return "frobenius"
    if beta == 1:
        return "kl"
    if beta == 0:
        return "is"
    return repr(beta)


def algo_of(p):
    """The didnmf algorithm: algo when given, else the solver's ('cd' is DID's coordinate
    descent, 'mu' multiplicative updates)."""
    return p["algo"] if p["algo"] is not None else SOLVERS.get(p["solver"], "did")


def resolve_init(init, missing=None, test_fraction=0):
    """didnmf's --init for scikit-learn's init. scikit-learn's None means 'nndsvda' when
    n_components <= min(n_samples, n_features), else 'random'; didnmf needs
    n_components <= min(n_samples, n_features) anyway, so None is 'nndsvda' -- except with
    missing values or a held-out test set, where the SVD would need every entry and None is
    'random' (scaled by the mean of the observed entries)."""
    if init is None:
        return "random" if missing or test_fraction else "nndsvda"
    return init


def resolve_seed(random_state):
    """The --seed for random_state: an int as it is; a RandomState draws one (so a seeded
    RandomState gives the same seed every time, and a shared one a new seed each call); None
    draws a fresh seed from the operating system's entropy (recorded in ``seed_``)."""
    if random_state is None:
        return int(np.random.default_rng().integers(0, 2**32))
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(0, 2**32, dtype=np.int64))
    return int(random_state)


def duration_flag(value, owner="NMF"):
    """--time-limit's value for time_limit: None (no limit), seconds (a number > 0) or a Go
    duration string such as '90s', '10m', '2h'."""
    if value is None:
        return None
    if _is_real(value):
        if not value > 0:
            raise _bad("time_limit", value, "None, a number of seconds > 0, or a duration such as '10m'", owner)
        return f"{float(value)!r}s"
    if isinstance(value, str) and value.strip():
        return value.strip()
    raise _bad("time_limit", value, "None, a number of seconds > 0, or a duration such as '10m'", owner)


def accel_flag(value, owner="NMF"):
    """--accel's value for accel: 'off' (plain DID), 'auto' (the command's AccelAuto: inner
    sweeps and extrapolation), 'x' (extrapolation alone), 'C,B' or 'C,B,eps' as a string, or a
    tuple (C, B) or (C, B, eps), each optionally followed by 'x' (',x' in a string): at most C
    coordinate sweeps over each row of W and B over H an iteration, each loop stopping once its
    step is below eps of its first (did, bcd and hals), and with 'x' extrapolation (did only)."""
    wants = (
        "'off', 'auto', 'x', or 'C,B' / 'C,B,eps' optionally followed by ',x' (a str or a tuple): "
        "C and B ints in [1, 100] (the most sweeps over W and over H an iteration), eps a float "
        "in (0, 1), x to extrapolate"
    )
    # str.strip() also drops \x1c-\x1f, which the command's (Go's) trimming keeps: refused.
    if isinstance(value, str) and any("\x1c" <= c <= "\x1f" for c in value):
        raise _bad("accel", value, wants, owner)
    if isinstance(value, str):
        if value.strip() in ACCEL_NAMES:
            return value.strip()
        parts = [x.strip() for x in value.split(",")]
    elif isinstance(value, (tuple, list)):
        parts = list(value)
    else:
        raise _bad("accel", value, wants, owner)
    extrapolate = len(parts) > 2 and parts[-1] == "x"
    if extrapolate:
        parts = parts[:-1]
    if not 2 <= len(parts) <= 3:
        raise _bad("accel", value, wants, owner)
    # The command's grammar (kernels.ParseAccel), not Python's: ASCII digits, no underscores,
    # a decimal eps (int() and float() also read '３' and '1_0').
    if any(isinstance(x, str) and not _COUNT.fullmatch(x.strip()) for x in parts[:2]):
        raise _bad("accel", value, wants, owner)
    if len(parts) == 3 and isinstance(parts[2], str) and not _DECIMAL.fullmatch(parts[2].strip()):
        raise _bad("accel", value, wants, owner)
    sweeps = [int(x) if isinstance(x, str) else x for x in parts[:2]]
    eps = float(parts[2]) if len(parts) == 3 else None
    if not all(_is_int(c) and 1 <= c <= MAX_ACCEL_SWEEPS for c in sweeps):
        raise _bad("accel", value, wants, owner)
    if len(parts) == 3 and not (isinstance(parts[2], str) or _is_real(parts[2])) or eps is not None and not 0 < eps < 1:
        raise _bad("accel", value, wants, owner)
    flag = f"{int(sweeps[0])},{int(sweeps[1])}"
    flag = flag if eps is None else f"{flag},{eps!r}"
    return flag + ",x" if extrapolate else flag


def model_flags(p):
    """The flags of the fitted model and its stopping: algorithm, loss, penalties, accel, tol,
    max_iter. scikit-learn's tol (the relative fall of the error between checks) is didnmf's
    --stall-tol; tol=0 runs exactly max_iter iterations (--tol 0 --stall-tol 0)."""
    flags = ["--algo", algo_of(p), "--max-iter", p["max_iter"], "--stall-tol", repr(float(p["tol"]))]
    if p["tol"] == 0:
        flags += ["--tol", "0"]
    loss = loss_flag(p["beta_loss"])
    if loss != "frobenius":
        flags += ["--loss", loss]
    flags += _penalty_flags(p, basis=True)
    flags += ["--accel", accel_flag(p["accel"])]
    return flags + _value_flags(p)


def _value_flags(p):
    """--transform for value_transform: what the model fits and new data are read as."""
    if p.get("value_transform", "none") != "none":
        return ["--transform", p["value_transform"]]
    return []


def _penalty_flags(p, basis):
    flags = []
    if p["alpha_W"]:
        flags += ["--alpha-coef", repr(float(p["alpha_W"]))]
    if basis and p["alpha_H"] != "same":
        flags += ["--alpha-basis", repr(float(p["alpha_H"]))]
    if p["l1_ratio"]:
        flags += ["--l1-ratio", repr(float(p["l1_ratio"]))]
    return flags


def transform_flags(p):
    """The penalty flags of a transform (scikit-learn's transform applies alpha_W), and the
    values' transform the model was fitted on."""
    return _penalty_flags(p, basis=False) + _value_flags(p)


def run_flags(p, in_memory, shards=True, fit=True):
    """The flags of where and how a job runs: shards, threads, in-process nodes or a cluster
    (with its security options), missing values, held-out entries, time limit, quiet.

    ``in_memory``: the input is a temporary file of this process, so on a cluster it is
    streamed to the shards (--ingest stream) unless ingest says otherwise. ``fit``: the job
    fits a model (not a transform for a fitted basis, which holds nothing out)."""
    flags = []
    if shards and p["shards"] != 1:
        flags += ["--shards", p["shards"]]
    if p["threads"] is not None:
        flags += ["--threads", p["threads"]]
    if p["nodes"]:
        flags += ["--nodes", p["nodes"]]
    if p["cluster"]:
        flags += ["--cluster", p["cluster"]]
        ingest = p["ingest"] or ("stream" if in_memory else "shared")
        flags += ["--ingest", ingest]
        if p["client_bind"]:
            flags += ["--client-bind", p["client_bind"]]
    for name, flag in (
        ("secret_file", "--secret-file"),
        ("tls_ca", "--tls-ca"),
        ("tls_cert", "--tls-cert"),
        ("tls_key", "--tls-key"),
    ):
        if p[name] is not None:
            flags += [flag, str(p[name])]
    if p["insecure"]:
        flags += ["--insecure"]
    if p["missing"]:
        flags += ["--missing", p["missing"]]
    if p["test_fraction"] and fit:
        flags += ["--test-fraction", repr(float(p["test_fraction"]))]
    tl = duration_flag(p["time_limit"])
    if tl:
        flags += ["--time-limit", tl]
    if not p["verbose"]:
        flags += ["--quiet"]
    return flags
