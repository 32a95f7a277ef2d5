# The four workloads bench/jax_bench.exs runs, written in Nx as bench/jax_models.py writes them in JAX
# (same arguments in the same order, same outputs), and their inputs: shapes for the benchmark (:full)
# and for the equality check the test command runs (:tiny), and deterministic data.
#
#  * mlp: an MLP training step, in -> h -> h -> classes (784 -> 512 -> 512 -> 10, batch 128), ReLU,
#    softmax cross-entropy, SGD; returns the new parameters and the loss;
#  * cnn: a small CNN training step on NHWC images (28x28x1, batch 64): two 3x3 convolutions (32 and
#    64 channels, no padding) with ReLU, 2x2 max pool, a dense layer to 10 classes; same loss and SGD;
#  * transformer: a pre-LayerNorm transformer encoder block's forward pass (batch 8, seq 128, d 256,
#    4 heads, MLP 1024 with tanh-GELU);
#  * add: x + 1 on f32[4] (a cached program's dispatch).
defmodule JaxBench.Models do
  import Nx.Defn

  # Softmax cross-entropy against one-hot labels, averaged over the batch (log_softmax as JAX's).
  defn cross_entropy(logits, labels) do
    shifted = logits - stop_grad(Nx.reduce_max(logits, axes: [-1], keep_axes: true))
    log_softmax = shifted - Nx.log(Nx.sum(Nx.exp(shifted), axes: [-1], keep_axes: true))
    Nx.mean(-Nx.sum(labels * log_softmax, axes: [-1]))
  end

  defnp relu(x), do: Nx.max(x, 0)

  defnp sgd(params, grads, lr) do
    {p1, p2, p3, p4, p5, p6} = params
    {g1, g2, g3, g4, g5, g6} = grads
    {p1 - lr * g1, p2 - lr * g2, p3 - lr * g3, p4 - lr * g4, p5 - lr * g5, p6 - lr * g6}
  end

  defn mlp_loss({w1, b1, w2, b2, w3, b3}, x, y) do
    h = relu(Nx.dot(x, w1) + b1)
    h = relu(Nx.dot(h, w2) + b2)
    cross_entropy(Nx.dot(h, w3) + b3, y)
  end

  defn mlp_step(w1, b1, w2, b2, w3, b3, x, y, opts \\ []) do
    opts = keyword!(opts, learning_rate: 0.01)
    params = {w1, b1, w2, b2, w3, b3}
    {loss, grads} = value_and_grad(params, &mlp_loss(&1, x, y))
    {p1, p2, p3, p4, p5, p6} = sgd(params, grads, opts[:learning_rate])
    {p1, p2, p3, p4, p5, p6, loss}
  end

  # A 3x3 convolution, stride 1, no padding: NHWC input, HWIO kernel (as JAX's dimension numbers).
  defnp conv(x, k) do
    Nx.conv(x, k, input_permutation: [0, 3, 1, 2], kernel_permutation: [3, 2, 0, 1], output_permutation: [0, 3, 1, 2])
  end

  defn cnn_loss({k1, c1, k2, c2, w, b}, x, y) do
    h = relu(conv(x, k1) + c1)
    h = relu(conv(h, k2) + c2)
    h = Nx.window_max(h, {1, 2, 2, 1}, strides: [1, 2, 2, 1])
    h = Nx.reshape(h, {Nx.axis_size(h, 0), :auto})
    cross_entropy(Nx.dot(h, w) + b, y)
  end

  defn cnn_step(k1, c1, k2, c2, w, b, x, y, opts \\ []) do
    opts = keyword!(opts, learning_rate: 0.01)
    params = {k1, c1, k2, c2, w, b}
    {loss, grads} = value_and_grad(params, &cnn_loss(&1, x, y))
    {p1, p2, p3, p4, p5, p6} = sgd(params, grads, opts[:learning_rate])
    {p1, p2, p3, p4, p5, p6, loss}
  end

  defnp layer_norm(x, scale, bias) do
    mean = Nx.mean(x, axes: [-1], keep_axes: true)
    var = Nx.mean((x - mean) * (x - mean), axes: [-1], keep_axes: true)
    (x - mean) * Nx.rsqrt(var + 1.0e-5) * scale + bias
  end

  @sqrt_2_over_pi :math.sqrt(2 / :math.pi())
  defnp gelu(x), do: 0.5 * x * (1 + Nx.tanh(@sqrt_2_over_pi * (x + 0.044715 * (x * x * x))))

  defnp softmax(x) do
    e = Nx.exp(x - stop_grad(Nx.reduce_max(x, axes: [-1], keep_axes: true)))
    e / Nx.sum(e, axes: [-1], keep_axes: true)
  end

  # [batch, seq, d] -> [batch, heads, seq, d / heads]
  defnp split_heads(t, opts) do
    {batch, seq, d} = Nx.shape(t)
    t |> Nx.reshape({batch, seq, opts[:heads], div(d, opts[:heads])}) |> Nx.transpose(axes: [0, 2, 1, 3])
  end

  # A pre-LayerNorm transformer encoder block: x + attention(LN(x)), then + MLP(LN(.)).
  defn encoder_block(x, ln1_s, ln1_b, wq, wk, wv, wo, ln2_s, ln2_b, w1, b1, w2, b2, opts \\ []) do
    opts = keyword!(opts, heads: 4)
    {batch, seq, d} = Nx.shape(x)
    hd = div(d, opts[:heads])
    h = layer_norm(x, ln1_s, ln1_b)
    q = split_heads(Nx.dot(h, wq), opts)
    k = split_heads(Nx.dot(h, wk), opts)
    v = split_heads(Nx.dot(h, wv), opts)
    scores = Nx.dot(q, [3], [0, 1], k, [3], [0, 1]) / Nx.sqrt(hd)
    attention = Nx.dot(softmax(scores), [3], [0, 1], v, [2], [0, 1])
    x = x + Nx.dot(attention |> Nx.transpose(axes: [0, 2, 1, 3]) |> Nx.reshape({batch, seq, d}), wo)
    h = layer_norm(x, ln2_s, ln2_b)
    {x + Nx.dot(gelu(Nx.dot(h, w1) + b1), w2) + b2}
  end

  defn add_one(x), do: {x + 1}

  @names [:mlp, :cnn, :transformer, :add]
  def names, do: @names

  @doc """
  The model's sizes: :full (the benchmark's) or :tiny (the test's equality check). The tiny training
  steps take a learning rate of 1, so that their new parameters differ from the old ones as much as
  the gradients do (at 0.01 a gradient wrong by 1% moves them by less than the check's tolerance).
  """
  def dims(:mlp, :full), do: %{batch: 128, in: 784, hidden: 512, classes: 10, learning_rate: 0.01}
  def dims(:mlp, :tiny), do: %{batch: 4, in: 12, hidden: 8, classes: 4, learning_rate: 1.0}
  def dims(:cnn, :full), do: %{batch: 64, side: 28, c1: 32, c2: 64, classes: 10, learning_rate: 0.01}
  def dims(:cnn, :tiny), do: %{batch: 2, side: 8, c1: 2, c2: 3, classes: 4, learning_rate: 1.0}
  def dims(:transformer, :full), do: %{batch: 8, seq: 128, d: 256, heads: 4, mlp: 1024}
  def dims(:transformer, :tiny), do: %{batch: 2, seq: 4, d: 8, heads: 2, mlp: 16}
  def dims(:add, _), do: %{n: 4}

  @doc "The function the model's arguments (in order) are given to: one output tuple."
  def function(:mlp, %{learning_rate: lr}), do: fn w1, b1, w2, b2, w3, b3, x, y -> mlp_step(w1, b1, w2, b2, w3, b3, x, y, learning_rate: lr) end
  def function(:cnn, %{learning_rate: lr}), do: fn k1, c1, k2, c2, w, b, x, y -> cnn_step(k1, c1, k2, c2, w, b, x, y, learning_rate: lr) end
  def function(:add, _), do: &add_one/1

  def function(:transformer, %{heads: heads}),
    do: fn x, a, b, c, d, e, f, g, h, i, j, k, l -> encoder_block(x, a, b, c, d, e, f, g, h, i, j, k, l, heads: heads) end

  @doc "How many leading arguments a step returns updated (0: not a training step)."
  def params(model) when model in [:mlp, :cnn], do: 6
  def params(_), do: 0

  @doc """
  The model's arguments in order: `{name, shape, init}` with init `{:uniform, center, half_width}`
  (deterministic values in [center - w, center + w), see `data/3`) or `{:one_hot, classes}`.
  """
  def inputs(:mlp, %{batch: n, in: i, hidden: h, classes: c}) do
    [{"w1", {i, h}, glorot(i, h)}, {"b1", {h}, {:uniform, 0.0, 0.1}}, {"w2", {h, h}, glorot(h, h)},
     {"b2", {h}, {:uniform, 0.0, 0.1}}, {"w3", {h, c}, glorot(h, c)}, {"b3", {c}, {:uniform, 0.0, 0.1}},
     {"x", {n, i}, {:uniform, 0.5, 0.5}}, {"y", {n, c}, {:one_hot, c}}]
  end

  def inputs(:cnn, %{batch: n, side: s, c1: c1, c2: c2, classes: c}) do
    flat = div(s - 4, 2) * div(s - 4, 2) * c2

    [{"k1", {3, 3, 1, c1}, glorot(9, 9 * c1)}, {"c1", {c1}, {:uniform, 0.0, 0.1}},
     {"k2", {3, 3, c1, c2}, glorot(9 * c1, 9 * c2)}, {"c2", {c2}, {:uniform, 0.0, 0.1}},
     {"w", {flat, c}, glorot(flat, c)}, {"b", {c}, {:uniform, 0.0, 0.1}},
     {"x", {n, s, s, 1}, {:uniform, 0.5, 0.5}}, {"y", {n, c}, {:one_hot, c}}]
  end

  def inputs(:transformer, %{batch: n, seq: s, d: d, mlp: m}) do
    ln = fn name -> [{name <> "_scale", {d}, {:uniform, 1.0, 0.1}}, {name <> "_bias", {d}, {:uniform, 0.0, 0.1}}] end

    [{"x", {n, s, d}, {:uniform, 0.0, 1.0}}] ++ ln.("ln1") ++
      for(w <- ~w(wq wk wv wo), do: {w, {d, d}, glorot(d, d)}) ++ ln.("ln2") ++
      [{"w1", {d, m}, glorot(d, m)}, {"b1", {m}, {:uniform, 0.0, 0.1}}, {"w2", {m, d}, glorot(m, d)},
       {"b2", {d}, {:uniform, 0.0, 0.1}}]
  end

  def inputs(:add, %{n: n}), do: [{"x", {n}, {:uniform, 0.0, 1.0}}]

  defp glorot(fan_in, fan_out), do: {:uniform, 0.0, :math.sqrt(6 / (fan_in + fan_out))}

  @doc """
  An input's elements as raw little-endian f32, the same on every run and machine: element i of the
  argument numbered `seed` comes from a 32-bit integer hash of (seed, i), made a double in [-1, 1),
  scaled in double precision and rounded once to f32; a one-hot row's class is that hash mod classes.
  """
  def data(seed, shape, {:uniform, center, width}) do
    for i <- 0..(Tuple.product(shape) - 1)//1, into: <<>> do
      <<center + width * (hash(seed, i) / 2_147_483_648 - 1)::float-32-little>>
    end
  end

  def data(seed, {rows, classes}, {:one_hot, classes}) do
    for r <- 0..(rows - 1)//1, hot = rem(hash(seed, r), classes), c <- 0..(classes - 1), into: <<>> do
      <<if(c == hot, do: 1.0, else: 0.0)::float-32-little>>
    end
  end

  import Bitwise

  # A 32-bit integer mixer (xor-shift-multiply) of the argument's seed and the element's index.
  defp hash(seed, i) do
    x = (seed * 0x9E3779B1 + i) &&& 0xFFFFFFFF
    x = bxor(x, x >>> 16)
    x = x * 0x7FEB352D &&& 0xFFFFFFFF
    x = bxor(x, x >>> 15)
    x = x * 0x846CA68B &&& 0xFFFFFFFF
    bxor(x, x >>> 16)
  end
end
