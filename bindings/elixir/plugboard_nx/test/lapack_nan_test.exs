defmodule Plugboard.Nx.LapackNaNTest do
  # On the LAPACK route (a CPU client: eigh and svd through plugboard's kernels), a matrix holding a
  # NaN or an infinity gives NaN results, as the in-program route and jax do. LAPACK's gesdd refuses
  # such a matrix (info -4), which failed the run with "INTERNAL ... LAPACK refused argument 4" for
  # svd, and for pinv and least_squares built on it (issue 34).
  use ExUnit.Case, async: true
  import Plugboard.Nx.Case

  defp all_nan?(t), do: t |> Nx.is_nan() |> Nx.all() |> Nx.to_number() == 1

  for {label, path} <- cpu_plugins() do
    test "on #{label}: svd, pinv, least_squares and eigh of a matrix holding a NaN or an infinity are NaN" do
      c = client(unquote(path))
      assert Plugboard.Nx.LinAlg.lapack?(c)
      jit = fn fun, args -> Nx.Defn.jit_apply(fun, args, compiler: Plugboard.Nx, client: c) end

      for type <- [:f32, :f64], bad <- [:nan, :infinity] do
        a = Nx.tensor([[1.0, bad], [3.0, 4.0], [5.0, 6.0]], type: type)
        {u, s, vt} = jit.(&Nx.LinAlg.svd/1, [a])
        assert all_nan?(s) and all_nan?(u) and all_nan?(vt), "svd #{type} #{bad}: #{inspect(s)}"
        assert all_nan?(jit.(&Nx.LinAlg.pinv/1, [a])), "pinv #{type} #{bad}"
        b = Nx.tensor([1.0, 2.0, 3.0], type: type)
        assert all_nan?(jit.(&Nx.LinAlg.least_squares/2, [a, b])), "least_squares #{type} #{bad}"
        sym = Nx.tensor([[2.0, bad], [bad, 1.0]], type: type)
        {w, v} = jit.(&Nx.LinAlg.eigh/1, [sym])
        assert all_nan?(w) and all_nan?(v), "eigh #{type} #{bad}: #{inspect(w)}"
      end

      # Only the matrix holding the NaN: the others of the batch get their answers.
      batch = Nx.tensor([[[3.0, 0.0], [0.0, 4.0]], [[:nan, 0.0], [0.0, 1.0]]], type: :f32)
      {_, s, _} = jit.(&Nx.LinAlg.svd/1, [batch])
      assert Nx.to_list(s[0]) == [4.0, 3.0]
      assert all_nan?(s[1])
    end
  end
end
