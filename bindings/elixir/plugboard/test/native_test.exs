defmodule Plugboard.NativeTest do
  use ExUnit.Case, async: false
  import Plugboard.TestSupport

  @priv :code.priv_dir(:plugboard) |> to_string()

  test "the NIF is the one base binary: no vendor runtime in its dependency closure" do
    for file <- ["lib/plugboard_nif.so", "lib/libplugboard.so.0"] do
      {out, 0} = System.cmd("ldd", [Path.join(@priv, file)])
      refute out =~ "not found", "#{file}: #{out}"
      for vendor <- ~w(libcuda libcudart libnvrtc libamdhip64 libhsa-runtime libtpu libnccl libcublas),
          do: refute(out =~ vendor, "#{file} depends on #{vendor}: #{out}")
    end
  end

  test "priv holds what a release needs and no test artifacts" do
    files = Path.wildcard(Path.join(@priv, "**/*")) |> Enum.filter(&File.regular?/1) |> Enum.map(&Path.relative_to(&1, @priv))
    assert "lib/plugboard_nif.so" in files and "lib/libplugboard.so.0" in files
    assert "bin/plugboard" in files and "bin/plugboard-isolate" in files
    refute Enum.any?(files, &(&1 =~ "fault" or &1 =~ "test")), inspect(files)
  end

  test "native objects are released once their terms are garbage" do
    {:ok, c} = Plugboard.open(first_plugin())
    exe = Plugboard.compile!(c, add_program())
    before = Plugboard.native_objects()

    {pid, ref} =
      spawn_monitor(fn ->
        for _ <- 1..500 do
          x = Plugboard.buffer!(c, f32s([1, 2, 3, 4]), :f32, {4})
          [_] = Plugboard.run!(exe, [x, x])
        end
      end)

    assert_receive {:DOWN, ^ref, :process, ^pid, :normal}, 30_000
    assert eventually(fn -> Plugboard.native_objects().buffer <= before.buffer end),
           "buffers left: #{inspect(Plugboard.native_objects())} (before: #{inspect(before)})"

    {pid, ref} = spawn_monitor(fn -> Plugboard.compile!(c, add_program()) end)
    assert_receive {:DOWN, ^ref, :process, ^pid, :normal}, 30_000
    assert eventually(fn -> Plugboard.native_objects().executable <= before.executable end)
  end

  test "calls left unanswered by a dead caller are released" do
    {:ok, c} = Plugboard.open(first_plugin())
    exe = Plugboard.compile!(c, callback_program(), callbacks: ["plugboard.print", "host_scale"])
    x = Plugboard.buffer!(c, f32s(Enum.to_list(1..8)), :f32, {2, 4})
    me = self()
    caller = spawn(fn -> Plugboard.run(exe, [x], callbacks: %{"host_scale" => fn _ -> send(me, :in); Process.sleep(:infinity) end}) end)
    assert_receive :in, 5_000
    Process.exit(caller, :kill)
    assert eventually(fn -> Plugboard.native_objects().call == 0 end)
  end
end
