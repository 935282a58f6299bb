// Errors the converter reports to a user: one line that names the file and, where there is one,
// the tensor. Everything that can go wrong with input or output throws ConvertError.
#pragma once
#include <stdexcept>
#include <string>

namespace leapconv {

class ConvertError : public std::runtime_error {
 public:
  ConvertError(std::string file, std::string tensor, std::string what)
      : std::runtime_error(compose(file, tensor, what)),
        file_(std::move(file)), tensor_(std::move(tensor)), detail_(std::move(what)) {}
  explicit ConvertError(std::string what) : ConvertError("", "", std::move(what)) {}

  const std::string& file() const { return file_; }
  const std::string& tensor() const { return tensor_; }
  const std::string& detail() const { return detail_; }

 private:
  static std::string compose(const std::string& file, const std::string& tensor,
                             const std::string& what) {
    std::string s;
    if (!file.empty()) s += file + ": ";
    if (!tensor.empty()) s += "tensor '" + tensor + "': ";
    return s + what;
  }
  std::string file_, tensor_, detail_;
};

}  // namespace leapconv
