// Emscripten 3.1.6 fd_pread/fd_pwrite drop the high 32 bits of the offset and
// pass the low half as a *signed* int => pread/pwrite at offsets >= 2 GiB are wrong.
// Override them (user --js-library entries replace the system ones; __proxy/__sig are kept).
// As upstream, a failing file system call returns its errno instead of throwing through wasm.
mergeInto(LibraryManager.library, {
  fd_pread: function(fd, iov, iovcnt, {{{ defineI64Param('offset') }}}, pnum) {
    {{{ receiveI64ParamAsI32s('offset') }}}
    try {
      var stream = SYSCALLS.getStreamFromFD(fd);
      var pos = offset_high * 4294967296 + (offset_low >>> 0);
      var ret = 0;
      for (var i = 0; i < iovcnt; i++) {
        var ptr = {{{ makeGetValue('iov', 'i*8', 'i32') }}};
        var len = {{{ makeGetValue('iov', 'i*8 + 4', 'i32') }}};
        var curr = FS.read(stream, HEAP8, ptr, len, pos);
        if (curr < 0) return {{{ cDefine('EIO') }}};
        ret += curr; pos += curr;
        if (curr < len) break;
      }
      {{{ makeSetValue('pnum', 0, 'ret', 'i32') }}};
      return 0;
    } catch (e) {
      if (typeof FS == 'undefined' || !(e instanceof FS.ErrnoError)) throw e;
      return e.errno;
    }
  },
  fd_pwrite: function(fd, iov, iovcnt, {{{ defineI64Param('offset') }}}, pnum) {
    {{{ receiveI64ParamAsI32s('offset') }}}
    try {
      var stream = SYSCALLS.getStreamFromFD(fd);
      var pos = offset_high * 4294967296 + (offset_low >>> 0);
      var ret = 0;
      for (var i = 0; i < iovcnt; i++) {
        var ptr = {{{ makeGetValue('iov', 'i*8', 'i32') }}};
        var len = {{{ makeGetValue('iov', 'i*8 + 4', 'i32') }}};
        var curr = FS.write(stream, HEAP8, ptr, len, pos);
        if (curr < 0) return {{{ cDefine('EIO') }}};
        ret += curr; pos += curr;
      }
      {{{ makeSetValue('pnum', 0, 'ret', 'i32') }}};
      return 0;
    } catch (e) {
      if (typeof FS == 'undefined' || !(e instanceof FS.ErrnoError)) throw e;
      return e.errno;
    }
  },
});
