#include <pacts/spec/mask.h>

namespace pacts::spec {

KeyRange row_keys(int64_t n, int32_t q_len, int32_t window, int32_t i) {
  const int64_t pos = n - q_len + i;
  if (pos < 0) return {0, 0};
  const int64_t begin = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
  return {begin, pos + 1};
}

KeyRange sequence_keys(int64_t n, int32_t q_len, int32_t window) {
  if (n <= 0) return {0, 0};
  // Both ends of a row's range grow by at most one per token, so the union is one range: from
  // the first row's start to the last row's end (pos = n - 1).
  const int64_t begin = window > 0 && n - q_len - window + 1 > 0 ? n - q_len - window + 1 : 0;
  return {begin, n};
}

KeyRange owned_columns(KeyRange keys, int32_t page_size) {
  if (keys.empty()) return {0, 0};
  return {keys.begin / page_size, (keys.end - 1) / page_size + 1};
}

}  // namespace pacts::spec
