defmodule PlugboardNative.PrecompiledTest do
  # The precompiled native part's pure parts (mix/precompiled.exs, loaded with mix.exs): reading
  # checksum.exs, choosing the archive for a NIF version and target, the URL template, and unpacking
  # an archive into priv/. tests/new_user_app_test.sh covers the download from a registry end to end.
  use ExUnit.Case, async: false
  alias PlugboardNative.Precompiled

  @moduletag :tmp_dir
  @hex String.duplicate("ab", 32)

  defp write_checksums(dir, text), do: File.write!(Path.join(dir, "checksum.exs"), text)

  describe "read_checksums/1" do
    test "none, a good map, and every malformed file named with what is wrong", %{tmp_dir: dir} do
      assert Precompiled.read_checksums(dir) == :none

      write_checksums(dir, ~s|%{"plugboard-nif-2.16-x86_64-linux-gnu-0.1.0.tar.gz" => "sha256:#{String.upcase(@hex)}"}|)
      assert Precompiled.read_checksums(dir) == {:ok, %{"plugboard-nif-2.16-x86_64-linux-gnu-0.1.0.tar.gz" => @hex}}

      path = Path.join(dir, "checksum.exs")

      for {text, expected} <- [
            {~s|%{"a.tar.gz" => "sha256:|, "cannot be read"},
            {~s|File.rm!("#{path}")|, "not a literal map"},
            {~s|["a.tar.gz"]|, "not a map"},
            {~s|%{"a.tar.gz" => "sha256:abc"}|, ~s(the entry {"a.tar.gz", "sha256:abc"} is not "sha256:" and 64 hex digits)},
            {~s|%{"a.tar.gz" => "md5:#{@hex}"}|, "is not an archive name =>"},
            {~s|%{a: "sha256:#{@hex}"}|, "is not an archive name =>"}
          ] do
        write_checksums(dir, text)
        assert {:error, message} = Precompiled.read_checksums(dir)
        assert message =~ path
        assert message =~ expected
      end

      # Read as data, never run: the file it would have removed is still there.
      assert File.exists?(path)
    end
  end

  describe "choose/4" do
    @sums %{
      "plugboard-nif-2.15-x86_64-linux-gnu-0.1.0.tar.gz" => "15",
      "plugboard-nif-2.16-x86_64-linux-gnu-0.1.0.tar.gz" => "16",
      "plugboard-nif-2.17-x86_64-linux-gnu-0.1.0.tar.gz" => "17",
      "plugboard-nif-2.16-aarch64-linux-gnu-0.1.0.tar.gz" => "arm",
      "plugboard-nif-2.16-x86_64-linux-gnu-0.2.0.tar.gz" => "next"
    }

    test "its own NIF version, else the newest older one of the same major, never a newer one" do
      assert {:ok, "plugboard-nif-2.16-x86_64-linux-gnu-0.1.0.tar.gz", "16"} = Precompiled.choose(@sums, "0.1.0", "2.16", "x86_64-linux-gnu")
      assert {:ok, _, "17"} = Precompiled.choose(@sums, "0.1.0", "2.18", "x86_64-linux-gnu")
      assert {:ok, _, "15"} = Precompiled.choose(Map.delete(@sums, "plugboard-nif-2.16-x86_64-linux-gnu-0.1.0.tar.gz"), "0.1.0", "2.16", "x86_64-linux-gnu")
      assert {:ok, _, "arm"} = Precompiled.choose(@sums, "0.1.0", "2.16", "aarch64-linux-gnu")
      assert {:ok, _, "next"} = Precompiled.choose(@sums, "0.2.0", "2.16", "x86_64-linux-gnu")
    end

    test "nothing for this VM says what there is and how to build instead" do
      for {nif, target} <- [{"2.14", "x86_64-linux-gnu"}, {"3.0", "x86_64-linux-gnu"}, {"2.16", "x86_64-linux-musl"}] do
        assert {:error, message} = Precompiled.choose(@sums, "0.1.0", nif, target)
        assert message =~ "no precompiled native part for NIF #{nif} on #{target}"
        assert message =~ "plugboard-nif-2.15-x86_64-linux-gnu-0.1.0.tar.gz"
        assert message =~ "PLUGBOARD_BUILD=true"
      end
    end

    test "the target triple as cc_precompiler writes it" do
      assert Precompiled.target("x86_64-pc-linux-gnu") == "x86_64-linux-gnu"
      assert Precompiled.target("aarch64-unknown-linux-gnu") == "aarch64-linux-gnu"
      assert Precompiled.artefact_name("0.1.0", "2.16", "x86_64-linux-gnu") == "plugboard-nif-2.16-x86_64-linux-gnu-0.1.0.tar.gz"
    end
  end

  test "the URL template: PLUGBOARD_PRECOMPILED_URL, else the :precompiled_url config, else the default" do
    file = "plugboard-nif-2.16-x86_64-linux-gnu-0.1.0.tar.gz"
    previous = System.get_env("PLUGBOARD_PRECOMPILED_URL")

    try do
      System.delete_env("PLUGBOARD_PRECOMPILED_URL")
      assert Precompiled.url(file, "0.1.0") =~ ~r{/v0\.1\.0/#{Regex.escape(file)}$}
      Application.put_env(:plugboard, :precompiled_url, "http://mirror.example/{version}/{filename}")
      assert Precompiled.url(file, "0.1.0") == "http://mirror.example/0.1.0/#{file}"
      System.put_env("PLUGBOARD_PRECOMPILED_URL", "http://127.0.0.1:9/{filename}")
      assert Precompiled.url(file, "0.1.0") == "http://127.0.0.1:9/#{file}"
    after
      Application.delete_env(:plugboard, :precompiled_url)
      if previous, do: System.put_env("PLUGBOARD_PRECOMPILED_URL", previous), else: System.delete_env("PLUGBOARD_PRECOMPILED_URL")
    end
  end

  defp archive(dir, entries) do
    src = Path.join(dir, "src")

    for {name, body} <- entries do
      File.mkdir_p!(Path.dirname(Path.join(src, name)))
      File.write!(Path.join(src, name), body)
    end

    path = Path.join(dir, "a.tar.gz")
    files = for {name, _} <- entries, do: {String.to_charlist(name), String.to_charlist(Path.join(src, name))}
    :ok = :erl_tar.create(String.to_charlist(path), files, [:compressed])
    File.read!(path)
  end

  @complete [{"lib/plugboard_nif.so", "nif"}, {"lib/libplugboard.so.0", "lib"}, {"bin/plugboard", "cli"}, {"bin/plugboard-isolate", "iso"}]

  describe "unpack/3" do
    test "a complete archive replaces priv's lib/ and bin/ whole", %{tmp_dir: dir} do
      priv = Path.join(dir, "priv")
      File.mkdir_p!(Path.join(priv, "lib"))
      File.write!(Path.join(priv, "lib/stale_bridge.so"), "old")
      assert :ok = Precompiled.unpack(archive(dir, @complete), "a.tar.gz", priv)
      assert File.read!(Path.join(priv, "lib/plugboard_nif.so")) == "nif"
      assert File.read!(Path.join(priv, "bin/plugboard-isolate")) == "iso"
      refute File.exists?(Path.join(priv, "lib/stale_bridge.so"))
    end

    test "an archive with something else, or lacking a part, is refused naming it; priv is untouched", %{tmp_dir: dir} do
      priv = Path.join(dir, "priv")
      File.mkdir_p!(Path.join(priv, "lib"))
      File.write!(Path.join(priv, "lib/plugboard_nif.so"), "good")

      for {entries, expected} <- [
            {@complete ++ [{"etc/evil", "x"}], "a.tar.gz holds what a precompiled archive must not: etc/evil"},
            {@complete ++ [{"lib/sub/x.so", "x"}], "lib/sub/x.so"},
            {Enum.drop(@complete, -1), "a.tar.gz lacks bin/plugboard-isolate"}
          ] do
        File.rm_rf!(Path.join(dir, "src"))
        assert {:error, message} = Precompiled.unpack(archive(dir, entries), "a.tar.gz", priv)
        assert message =~ expected
        assert File.read!(Path.join(priv, "lib/plugboard_nif.so")) == "good"
        refute File.exists?(Path.join(priv, "bin"))
      end

      assert {:error, message} = Precompiled.unpack("not a tarball", "junk.tar.gz", priv)
      assert message =~ "cannot read junk.tar.gz"
    end
  end

  describe "fetch/3" do
    setup %{tmp_dir: dir} do
      previous = System.get_env("XDG_CACHE_HOME")
      System.put_env("XDG_CACHE_HOME", dir)
      on_exit(fn -> if previous, do: System.put_env("XDG_CACHE_HOME", previous), else: System.delete_env("XDG_CACHE_HOME") end)
      :ok
    end

    test "a cached copy with the right sha256 is used without the network" do
      File.mkdir_p!(Precompiled.cache_dir())
      File.write!(Path.join(Precompiled.cache_dir(), "x.tar.gz"), "bytes")
      assert {:ok, "bytes"} = Precompiled.fetch("x.tar.gz", "http://127.0.0.1:9/x.tar.gz", Precompiled.sha256("bytes"))
    end

    test "a cached copy that differs is fetched again; an unreachable URL is named with PLUGBOARD_BUILD" do
      File.mkdir_p!(Precompiled.cache_dir())
      File.write!(Path.join(Precompiled.cache_dir(), "x.tar.gz"), "tampered")
      assert {:error, message} = Precompiled.fetch("x.tar.gz", "http://127.0.0.1:9/x.tar.gz", Precompiled.sha256("bytes"))
      assert message =~ "cannot download the precompiled native part from http://127.0.0.1:9/x.tar.gz"
      assert message =~ "PLUGBOARD_BUILD=true"
    end
  end
end
