# Warning flags and sanitizers shared by every prnn target: link `prnn_options`.
add_library(prnn_options INTERFACE)

set(_prnn_cxx_warnings -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion)
if(PRNN_WERROR)
  list(APPEND _prnn_cxx_warnings -Werror)
endif()
target_compile_options(prnn_options INTERFACE $<$<COMPILE_LANGUAGE:CXX>:${_prnn_cxx_warnings}>)

if(PRNN_CUDA)
  set(_prnn_cuda_flags --expt-relaxed-constexpr -lineinfo)
  if(PRNN_WERROR)
    list(APPEND _prnn_cuda_flags -Werror=all-warnings)
  endif()
  target_compile_options(prnn_options INTERFACE
    $<$<COMPILE_LANGUAGE:CUDA>:${_prnn_cuda_flags}>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra>)
  target_compile_definitions(prnn_options INTERFACE PRNN_WITH_CUDA=1)
else()
  target_compile_definitions(prnn_options INTERFACE PRNN_WITH_CUDA=0)
endif()

if(PRNN_SANITIZE)
  target_compile_options(prnn_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:-fsanitize=address,undefined -fno-omit-frame-pointer>)
  target_link_options(prnn_options INTERFACE -fsanitize=address,undefined)
endif()
