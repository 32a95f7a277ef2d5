# The documentation both Mix projects build with `mix docs` (ex_doc): the guides in the repository's
# docs/ folder as extras, in the same order and groups on both sites, so that a reader who lands on
# either finds every guide and every link between guides resolves. Required by both mix.exs files;
# scripts/docs.sh builds both (MIX_ENV=docs, warnings fail the build).
defmodule Plugboard.DocsConfig do
  @guides Path.expand("../../docs", __DIR__)

  @extras [
    {"Start here", ~w(getting-started release deploying)},
    {"Elixir and Nx", ~w(nx cluster host-callbacks telemetry traces)},
    {"Reference", ~w(hostile-input performance cpp-library design)}
  ]

  # Names the guides and docs mention as code but that are not links: modules of the implementation
  # (no page of their own: @moduledoc false) and functions of the other Nx the packages support (the
  # docs are built against Nx 0.13.1; Nx 1.0 adds these).
  @not_links ~w(
    Plugboard.Native Plugboard.Nx.Ops Plugboard.Nx.Blocks Plugboard.Nx.LinAlg Plugboard.Nx.BufferPressure
    Plugboard.Nx.LinAlg.compute_in_program/1 Plugboard.Nx.Cache.key/4
    Nx.io_call/2 Nx.io_call/3 Nx.donatable/1 Nx.donatable?/1 Nx.Defn.Expr.io_call/2 Nx.Defn.Expr.hook/2
  )

  @doc "ex_doc's options for a project: `main` its first page, `groups_for_modules` its own."
  def docs(main, groups_for_modules) do
    [
      main: main,
      extras: Enum.flat_map(@extras, fn {_, names} -> Enum.map(names, &guide/1) end),
      groups_for_extras: Enum.map(@extras, fn {group, names} -> {group, Enum.map(names, &guide/1)} end),
      groups_for_modules: groups_for_modules,
      assets: %{Path.join(@guides, "images") => "images"},
      source_url: "https://github.com/plugboard/plugboard",
      # "View source" links: paths from the repository's root (ex_doc gives them relative to the
      # project, and the guides, outside either project, as absolute paths).
      source_url_pattern: &source_url/2,
      skip_code_autolink_to: @not_links,
      formatters: ["html"]
    ]
  end

  defp guide(name), do: Path.join(@guides, name <> ".md")

  @root Path.expand("../..", __DIR__)
  @doc false
  def source_url(path, line),
    do: "https://github.com/plugboard/plugboard/blob/main/#{Path.relative_to(Path.expand(path), @root)}#L#{line}"
end
