// Wheel: zip_open / zip_stat_index for the member list, zip_fopen_index + zip_fread to stream one out.
#include "fetch/wheel.h"

#include <sys/stat.h>
#include <zip.h>

#include "fetch/hasher.h"
#include "fetch/progress.h"

namespace plugboard::fetch {
namespace {

struct ZipFileCloser {
  void operator()(zip_file_t* f) const { zip_fclose(f); }
};

std::string zip_open_message(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string message = zip_error_strerror(&error);
  zip_error_fini(&error);
  return message;
}

}  // namespace

void Wheel::Closer::operator()(zip* z) const { zip_discard(z); }

Expected<Wheel> Wheel::open(const std::filesystem::path& path) {
  int code = 0;
  std::unique_ptr<zip, Closer> archive(zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code));
  if (!archive)
    return make_error(code == ZIP_ER_NOENT ? Code::kNotFound : Code::kDataLoss,
                      "cannot open wheel " + path.string() + ": " + zip_open_message(code));
  const zip_int64_t count = zip_get_num_entries(archive.get(), 0);
  std::vector<WheelMember> members;
  for (zip_int64_t i = 0; i < count; ++i) {
    zip_stat_t st;
    if (zip_stat_index(archive.get(), static_cast<zip_uint64_t>(i), 0, &st) != 0)
      return make_error(Code::kDataLoss, "wheel " + path.string() + ": cannot read entry " + std::to_string(i) +
                                             ": " + zip_strerror(archive.get()));
    if (!(st.valid & ZIP_STAT_NAME) || !(st.valid & ZIP_STAT_SIZE)) continue;
    members.push_back({st.name, st.size, static_cast<uint64_t>(i)});
  }
  return Wheel(path, std::move(archive), std::move(members));
}

const WheelMember* Wheel::find(std::string_view name) const {
  for (const WheelMember& m : members_)
    if (m.name == name) return &m;
  return nullptr;
}

Expected<ExtractedMember> Wheel::extract(const WheelMember& member, const std::filesystem::path& dir,
                                         bool progress) const {
  const std::string what = member.name + " of wheel " + path_.string();
  std::unique_ptr<zip_file_t, ZipFileCloser> in(zip_fopen_index(archive_.get(), member.index, 0));
  if (!in) return make_error(Code::kDataLoss, "cannot open " + what + ": " + zip_strerror(archive_.get()));
  PB_ASSIGN_OR_RETURN(TempFile out, TempFile::create(dir));

  Sha256Hasher hasher;
  Progress bar(progress, "extracting " + std::filesystem::path(member.name).filename().string(), member.size);
  std::vector<std::byte> block(1 << 20);
  uint64_t done = 0;
  for (;;) {
    const zip_int64_t n = zip_fread(in.get(), block.data(), block.size());
    if (n < 0)
      return make_error(Code::kDataLoss, "cannot extract " + what + ": " + zip_file_strerror(in.get()));
    if (n == 0) break;
    const std::span<const std::byte> chunk(block.data(), static_cast<size_t>(n));
    hasher.update(chunk);
    PB_RETURN_IF_ERROR(out.write_all(chunk));
    done += static_cast<uint64_t>(n);
    bar.update(done);
  }
  if (done != member.size)
    return make_error(Code::kDataLoss, "extracting " + what + " gave " + std::to_string(done) +
                                           " bytes, its entry says " + std::to_string(member.size));
  return ExtractedMember{std::move(out), hasher.hex_digest(), done};
}

}  // namespace plugboard::fetch
