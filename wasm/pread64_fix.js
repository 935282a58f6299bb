// Emscripten 3.1.6 fd_pread/fd_pwrite drop the high 32 bits of the offset and
// pass the low half as a *signed* int => pread/pwrite at offsets >= 2 GiB are wrong.
// Override them (user --js-library entries replace the system ones; __proxy/__sig are kept,
// __deps are replaced, hence $SYSCALLS below). Both go through one helper.
mergeInto(LibraryManager.library, {
  // Every iovec in turn at a 64-bit position. As upstream, a failing file system call returns
  // its errno instead of throwing through wasm.
  $leapconvPositionedIo: function(fd, iov, iovcnt, pos, pnum, write) {
    try {
      var stream = SYSCALLS.getStreamFromFD(fd);
      var ret = 0;
      for (var i = 0; i < iovcnt; i++) {
        var ptr = {{{ makeGetValue('iov', 'i*8', 'i32') }}};
        var len = {{{ makeGetValue('iov', 'i*8 + 4', 'i32') }}};
        var curr = write ? FS.write(stream, HEAP8, ptr, len, pos) : FS.read(stream, HEAP8, ptr, len, pos);
        if (curr < 0) return {{{ cDefine('EIO') }}};
        ret += curr; pos += curr;
        if (!write && curr < len) break;  // end of file
      }
      {{{ makeSetValue('pnum', 0, 'ret', 'i32') }}};
      return 0;
    } catch (e) {
      if (typeof FS == 'undefined' || !(e instanceof FS.ErrnoError)) throw e;
      return e.errno;
    }
  },
  fd_pread__deps: ['$SYSCALLS', '$leapconvPositionedIo'],
  fd_pread: function(fd, iov, iovcnt, {{{ defineI64Param('offset') }}}, pnum) {
    {{{ receiveI64ParamAsI32s('offset') }}}
    return leapconvPositionedIo(fd, iov, iovcnt, offset_high * 4294967296 + (offset_low >>> 0), pnum, false);
  },
  fd_pwrite__deps: ['$SYSCALLS', '$leapconvPositionedIo'],
  fd_pwrite: function(fd, iov, iovcnt, {{{ defineI64Param('offset') }}}, pnum) {
    {{{ receiveI64ParamAsI32s('offset') }}}
    return leapconvPositionedIo(fd, iov, iovcnt, offset_high * 4294967296 + (offset_low >>> 0), pnum, true);
  },
});
