// Wheel: zip_open / zip_stat_index for the member list, zip_fopen_index + zip_fread to stream one out.
#include "fetch/wheel.h"

#include <sys/stat.h>
#include <zip.h>

#include <algorithm>

#include "base/regular_file.h"
#include "base/sha256.h"
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
  // Opened here (O_NONBLOCK, regular files only), so a FIFO named like a wheel is refused, not waited on.
  auto fd = open_regular_file(path);
  if (!fd) return std::unexpected(std::move(fd).error().annotate("opening wheel " + path.string()));
  int code = 0;
  std::unique_ptr<zip, Closer> archive(zip_fdopen(fd->get(), ZIP_RDONLY | ZIP_CHECKCONS, &code));
  if (!archive)
    return make_error(Code::kDataLoss, "cannot open wheel " + path.string() + ": " + zip_open_message(code));
  fd->release();  // the archive owns it now
  const zip_int64_t count = zip_get_num_entries(archive.get(), 0);
  std::vector<WheelMember> members;
  for (zip_int64_t i = 0; i < count; ++i) {
    const auto index = static_cast<zip_uint64_t>(i);
    zip_stat_t st;
    if (zip_stat_index(archive.get(), index, 0, &st) != 0)
      return make_error(Code::kDataLoss, "wheel " + path.string() + ": cannot read entry " + std::to_string(i) +
                                             ": " + zip_strerror(archive.get()));
    if (!(st.valid & ZIP_STAT_NAME) || !(st.valid & ZIP_STAT_SIZE)) continue;
    WheelMember m{st.name, st.size, index, (st.valid & ZIP_STAT_COMP_SIZE) ? st.comp_size : st.size, false};
    zip_uint8_t opsys = 0;
    zip_uint32_t attributes = 0;
    if (zip_file_get_external_attributes(archive.get(), index, 0, &opsys, &attributes) == 0 && opsys == ZIP_OPSYS_UNIX)
      m.symlink = S_ISLNK(static_cast<mode_t>(attributes >> 16));
    members.push_back(std::move(m));
  }
  return Wheel(path, std::move(archive), std::move(members));
}

const WheelMember* Wheel::find(std::string_view name) const {
  for (const WheelMember& m : members_)
    if (m.name == name) return &m;
  return nullptr;
}

Status Wheel::check_member(const WheelMember& member) const {
  const std::string what = "member " + member.name + " of wheel " + path_.string();
  if (member.symlink)
    return make_error(Code::kFailedPrecondition, what + " is a symbolic link: refused (a wheel's files are files)");
  if (member.size > kMaxMemberBytes)
    return make_error(Code::kResourceExhausted, what + " declares " + std::to_string(member.size) +
                                                    " bytes, more than the limit of " + std::to_string(kMaxMemberBytes) +
                                                    ": refused before extraction");
  if (member.size > kInflationRatioFloor && member.size / std::max<uint64_t>(member.compressed_size, 1) > kMaxInflationRatio)
    return make_error(Code::kResourceExhausted,
                      what + " would inflate from " + std::to_string(member.compressed_size) + " to " +
                          std::to_string(member.size) + " bytes, more than " + std::to_string(kMaxInflationRatio) +
                          " times: refused before extraction (a zip bomb?)");
  return ok();
}

Status Wheel::read(const WheelMember& member, const Sink& sink, bool progress) const {
  PB_RETURN_IF_ERROR(check_member(member));
  const std::string what = member.name + " of wheel " + path_.string();
  std::unique_ptr<zip_file_t, ZipFileCloser> in(zip_fopen_index(archive_.get(), member.index, 0));
  if (!in) return make_error(Code::kDataLoss, "cannot open " + what + ": " + zip_strerror(archive_.get()));
  Progress bar(progress, "extracting " + std::filesystem::path(member.name).filename().string(), member.size);
  std::vector<std::byte> block(1 << 20);
  uint64_t done = 0;
  for (;;) {
    // Never ask for more than one byte past what the entry declares: that byte is the proof of a lie.
    const uint64_t want = std::min<uint64_t>(block.size(), member.size - done + 1);
    const zip_int64_t n = zip_fread(in.get(), block.data(), want);
    if (n < 0)
      return make_error(Code::kDataLoss, "cannot extract " + what + ": " + zip_file_strerror(in.get()));
    if (n == 0) break;
    if (static_cast<uint64_t>(n) > member.size - done)
      return make_error(Code::kDataLoss, "extracting " + what + ": it inflates past the " + std::to_string(member.size) +
                                             " bytes its entry declares: refused");
    PB_RETURN_IF_ERROR(sink(std::span<const std::byte>(block.data(), static_cast<size_t>(n))));
    done += static_cast<uint64_t>(n);
    bar.update(done);
  }
  if (done != member.size)
    return make_error(Code::kDataLoss, "extracting " + what + " gave " + std::to_string(done) +
                                           " bytes, its entry says " + std::to_string(member.size));
  return ok();
}

Expected<ExtractedMember> Wheel::extract(const WheelMember& member, const std::filesystem::path& dir,
                                         bool progress) const {
  PB_RETURN_IF_ERROR(check_member(member));
  PB_ASSIGN_OR_RETURN(AtomicFile out, AtomicFile::create(dir));
  Sha256 hasher;
  uint64_t done = 0;
  PB_RETURN_IF_ERROR(read(member, [&](std::span<const std::byte> chunk) -> Status {
    hasher.update(chunk);
    done += chunk.size();
    return out.write_all(chunk);
  }, progress));
  return ExtractedMember{std::move(out), hasher.hex_digest(), done};
}

}  // namespace plugboard::fetch
