"""JAX's side of scripts/bench_callbacks.sh: the cost of one f32[4] identity callback inside a jitted
function on CPU, measured as plugboard's callback_bench measures its own (the program with the
callback minus the same program without it, execute + block_until_ready, median of interleaved
rounds). Prints one JSON object.

    python bench/jax_callbacks.py [--quick]
"""
import json
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import io_callback

quick = "--quick" in sys.argv
rounds, iters = (5, 100) if quick else (15, 300)

jax.config.update("jax_platforms", "cpu")
x = jnp.asarray(np.array([1, 2, 3, 4], dtype=np.float32))
spec = jax.ShapeDtypeStruct((4,), jnp.float32)


def identity(v):
    return np.asarray(v)


def log(v):
    return None


plain = jax.jit(lambda v: v + v)
pure = jax.jit(lambda v: (lambda t: t + t)(jax.pure_callback(identity, spec, v)))
io_unordered = jax.jit(lambda v: (io_callback(log, None, v), v + v)[1])
io_ordered = jax.jit(lambda v: (io_callback(log, None, v, ordered=True), v + v)[1])
variants = {"plain": plain, "pure_callback": pure, "io_callback": io_unordered, "io_callback_ordered": io_ordered}

for f in variants.values():  # compile and warm
    for _ in range(20):
        f(x).block_until_ready()
jax.effects_barrier()

samples = {name: [] for name in variants}
for _ in range(rounds):
    for name, f in variants.items():
        t0 = time.perf_counter()
        for _ in range(iters):
            f(x).block_until_ready()
        jax.effects_barrier()  # io_callback's effects are done, as plugboard's await guarantees
        samples[name].append((time.perf_counter() - t0) / iters * 1e6)

med = {name: statistics.median(v) for name, v in samples.items()}
print(json.dumps({
    "jax": jax.__version__, "jaxlib": jax.lib.__version__ if hasattr(jax.lib, "__version__") else None,
    "plain_us": med["plain"], "pure_callback_us": med["pure_callback"], "io_callback_us": med["io_callback"],
    "io_callback_ordered_us": med["io_callback_ordered"],
    "pure_callback_cost_us": med["pure_callback"] - med["plain"],
    "io_callback_cost_us": med["io_callback"] - med["plain"],
    "io_callback_ordered_cost_us": med["io_callback_ordered"] - med["plain"],
}))
