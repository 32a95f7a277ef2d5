"""JAX's side of bench/jax_bench.exs: the four workloads of bench/jax_models.exs written in JAX, run by
a worker that the Elixir driver starts (as a port, so both sides run on the same cores and take turns)
and talks to in JSON lines on stdin/stdout, one answer per request:

  {"cmd": "version"} -> {"jax": "0.10.2"}
  {"cmd": "load", "model": M, "dims": {...}, "inputs": [{"file": F, "shape": [...]}, ...]}
      reads the inputs (raw little-endian f32, written by the driver) onto the device -> {"ok": true}
  {"cmd": "outputs", "model": M, "dir": D}
      one call of the jitted function; each output to D/M.outI.f32 -> {"shapes": [[...], ...]}
  {"cmd": "steady", "model": M, "n": N}
      N calls, each on the previous call's parameters where the model is a training step, then
      block_until_ready on the last (JAX's asynchronous dispatch, as a training loop uses it);
      the dispatch model blocks on every call -> {"us": per call, "cpu_us": this process's CPU time
      per call, all threads}
  {"cmd": "first", "model": M}
      jax.clear_caches(), then jax.jit of the function and its first call, blocked
      -> {"us": first call, "compile_us": XLA's compile alone of the same lowered module}
  {"cmd": "lowered", "model": M}
      the StableHLO module jax.jit lowers the function to -> {"text": MLIR text}
  {"cmd": "quit"}

    python bench/jax_models.py      (the driver runs it; JAX 0.10.2 from bench/requirements-jax.txt)
"""
import json
import math
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

jax.config.update("jax_platforms", "cpu")

def cross_entropy(logits, labels):
    """Softmax cross-entropy against one-hot labels, averaged over the batch."""
    return jnp.mean(-jnp.sum(labels * jax.nn.log_softmax(logits, axis=-1), axis=-1))


def sgd(params, grads, lr):
    return tuple(p - lr * g for p, g in zip(params, grads))


def mlp_loss(params, x, y):
    w1, b1, w2, b2, w3, b3 = params
    h = jax.nn.relu(x @ w1 + b1)
    h = jax.nn.relu(h @ w2 + b2)
    return cross_entropy(h @ w3 + b3, y)


def mlp_step(w1, b1, w2, b2, w3, b3, x, y, learning_rate):
    params = (w1, b1, w2, b2, w3, b3)
    loss, grads = jax.value_and_grad(mlp_loss)(params, x, y)
    return sgd(params, grads, learning_rate) + (loss,)


def conv(x, k):
    """A 3x3 convolution, stride 1, no padding: NHWC input, HWIO kernel."""
    return lax.conv_general_dilated(x, k, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def cnn_loss(params, x, y):
    k1, c1, k2, c2, w, b = params
    h = jax.nn.relu(conv(x, k1) + c1)
    h = jax.nn.relu(conv(h, k2) + c2)
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = h.reshape(h.shape[0], -1)
    return cross_entropy(h @ w + b, y)


def cnn_step(k1, c1, k2, c2, w, b, x, y, learning_rate):
    params = (k1, c1, k2, c2, w, b)
    loss, grads = jax.value_and_grad(cnn_loss)(params, x, y)
    return sgd(params, grads, learning_rate) + (loss,)


def layer_norm(x, scale, bias):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + 1e-5) * scale + bias


def gelu(x):
    """GELU, tanh approximation (jax.nn.gelu's default), written out as the Nx side writes it."""
    return 0.5 * x * (1 + jnp.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * (x * x * x))))


def encoder_block(x, ln1_s, ln1_b, wq, wk, wv, wo, ln2_s, ln2_b, w1, b1, w2, b2, heads):
    """A pre-LayerNorm transformer encoder block: x + attention(LN(x)), then + MLP(LN(.))."""
    batch, seq, d = x.shape
    hd = d // heads
    h = layer_norm(x, ln1_s, ln1_b)

    def split(t):  # [batch, seq, d] -> [batch, heads, seq, hd]
        return t.reshape(batch, seq, heads, hd).transpose(0, 2, 1, 3)

    q, k, v = split(h @ wq), split(h @ wk), split(h @ wv)
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(hd)
    attention = jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v)
    x = x + attention.transpose(0, 2, 1, 3).reshape(batch, seq, d) @ wo
    h = layer_norm(x, ln2_s, ln2_b)
    return (x + gelu(h @ w1 + b1) @ w2 + b2,)


def add_one(x):
    return (x + 1,)


class Model:
    def __init__(self, name, dims, arrays):
        self.name = name
        if name in ("mlp", "cnn"):
            step, lr = (mlp_step if name == "mlp" else cnn_step), dims["learning_rate"]
            self.fun, self.params = (lambda *a: step(*a, learning_rate=lr)), 6
        elif name == "transformer":
            heads = dims["heads"]
            self.fun, self.params = (lambda *a: encoder_block(*a, heads=heads)), 0
        elif name == "add":
            self.fun, self.params = add_one, 0
        else:
            raise ValueError(f"unknown model {name!r}")
        self.args = [jax.device_put(a) for a in arrays]
        self.jitted = jax.jit(self.fun)
        jax.block_until_ready(self.jitted(*self.args))

    def steady(self, n):
        """Wall and CPU (this process's, all threads) microseconds per call of n calls."""
        args = self.args
        t0, c0 = time.perf_counter(), time.process_time()
        if self.params:  # a training loop: each step on the last step's parameters
            for _ in range(n):
                out = self.jitted(*args)
                args = list(out[: self.params]) + args[self.params:]
            jax.block_until_ready(out)
        else:  # a call's latency: wait for each
            for _ in range(n):
                jax.block_until_ready(self.jitted(*args))
        return {"us": (time.perf_counter() - t0) / n * 1e6, "cpu_us": (time.process_time() - c0) / n * 1e6}

    def first(self):
        jax.clear_caches()
        t0 = time.perf_counter()
        jax.block_until_ready(jax.jit(self.fun)(*self.args))
        first_us = (time.perf_counter() - t0) * 1e6
        jax.clear_caches()
        lowered = jax.jit(self.fun).lower(*self.args)  # a Lowered keeps what it compiled: a new one
        t0 = time.perf_counter()
        lowered.compile()
        return {"us": first_us, "compile_us": (time.perf_counter() - t0) * 1e6}


def main():
    models = {}
    for line in sys.stdin:
        req = json.loads(line)
        cmd = req["cmd"]
        if cmd == "quit":
            break
        try:
            reply = handle(models, req)
        except Exception as e:  # the driver raises it, naming the request
            reply = {"error": f"{type(e).__name__}: {e}"}
        print(json.dumps(reply), flush=True)


def handle(models, req):
    cmd = req["cmd"]
    if cmd == "version":
        return {"jax": jax.__version__}
    if cmd == "load":
        arrays = [np.fromfile(i["file"], dtype="<f4").reshape(i["shape"]) for i in req["inputs"]]
        models[req["model"]] = Model(req["model"], req["dims"], arrays)
        return {"ok": True}
    m = models[req["model"]]
    if cmd == "outputs":
        outs = [np.asarray(o) for o in jax.jit(m.fun)(*m.args)]
        for i, o in enumerate(outs):
            o.astype("<f4").tofile(f"{req['dir']}/{m.name}.out{i}.f32")
        return {"shapes": [list(o.shape) for o in outs]}
    if cmd == "steady":
        return m.steady(req["n"])
    if cmd == "first":
        return m.first()
    if cmd == "lowered":
        return {"text": jax.jit(m.fun).lower(*m.args).as_text()}
    return {"error": f"unknown command {cmd!r}"}


if __name__ == "__main__":
    main()
