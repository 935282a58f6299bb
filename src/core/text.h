// Small string tests every layer uses.
#pragma once
#include <string_view>

namespace leapconv {

inline bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace leapconv
