#!/usr/bin/env python3
"""png_bands.py: find a table in a screenshot by its colours, with the
standard library only (zlib and PNG's five row filters).

The status page (daemon/status_page.c) draws the held names' table
WIDTH pixels wide, its header row in HEAD and its rows alternately in
ODD and EVEN, colours used nowhere else.  This finds the header: the
first row of pixels holding a run of HEAD between WIDTH - 2 and
WIDTH + 2 pixels long (a screenshot at device scale 1; the header's
padding, above its text); then walks down from it,
3 pixels in from the table's left edge, and counts the bands of ODD and
EVEN that follow, one per table row, each spanning the table's width on
its first line (the row's padding, where no text is) and each the
other colour than the one above it.

usage: png_bands.py FILE.png WIDTH HEAD ODD EVEN      (colours as rrggbb)
prints: header x=X y=Y width=W height=H rows=N
exit status 1, with the reason, when no header is found or the image is
not an 8-bit RGB or RGBA PNG without interlacing.
"""
import struct
import sys
import zlib


def decode(path):
    """The image as (width, height, rows), each row a bytes of RGB triples."""
    with open(path, 'rb') as f:
        data = f.read()
    if data[:8] != b'\x89PNG\r\n\x1a\n':
        raise ValueError('not a PNG')
    pos, idat, head = 8, [], None
    while pos < len(data):
        length, kind = struct.unpack('>I4s', data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b'IHDR':
            head = struct.unpack('>IIBBBBB', body)
        elif kind == b'IDAT':
            idat.append(body)
        elif kind == b'IEND':
            break
    width, height, depth, ctype, _, _, interlace = head
    if depth != 8 or ctype not in (2, 6) or interlace != 0:
        raise ValueError('depth %d colour type %d interlace %d: not handled'
                         % (depth, ctype, interlace))
    bpp = 3 if ctype == 2 else 4
    raw = zlib.decompress(b''.join(idat))
    stride = width * bpp
    prev = bytearray(stride)
    rows = []
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 0xff
            elif ftype == 2:
                line[i] = (line[i] + b) & 0xff
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xff
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 0xff
        prev = line
        if bpp == 4:
            rows.append(bytes(v for j, v in enumerate(line) if j % 4 != 3))
        else:
            rows.append(bytes(line))
    return width, height, rows


def runs(row, colour):
    """(start, length) of each run of colour (3 bytes) in a row of RGB triples."""
    out, start = [], None
    for x in range(len(row) // 3):
        if row[3 * x:3 * x + 3] == colour:
            if start is None:
                start = x
        elif start is not None:
            out.append((start, x - start))
            start = None
    if start is not None:
        out.append((start, len(row) // 3 - start))
    return out


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__.split('\n\n')[2])
    path, want = sys.argv[1], int(sys.argv[2])
    head, odd, even = (bytes.fromhex(c) for c in sys.argv[3:6])
    try:
        width, height, rows = decode(path)
    except (OSError, ValueError, zlib.error, struct.error, TypeError) as e:
        print('%s: %s' % (path, e))
        return 1
    band = []
    for y in range(height):
        for x, n in runs(rows[y], head):
            if abs(n - want) <= 2:
                band.append((y, x, n))
                break
        if band:
            break       # the header's first line (its padding: no text)
    if not band:
        print('%s (%dx%d): no row holds a run of #%s %d px wide'
              % (path, width, height, head.hex(), want))
        return 1
    y0, x0, w0 = band[0]
    col = x0 + 3
    y = y0
    while y < height and rows[y][3 * col:3 * col + 3] == head:
        y += 1      # the header row, its text included
    hh = y - y0
    count, last = 0, None
    while y < height:
        px = rows[y][3 * col:3 * col + 3]
        if px not in (odd, even):
            break
        if px == last:
            print('%s: two rows of #%s follow each other at y=%d' % (path, px.hex(), y))
            return 1
        full = [n for x, n in runs(rows[y], px) if x <= x0 + 1 and abs(n - w0) <= 2]
        if not full:
            print('%s: the row at y=%d is #%s but not across the table (%d px)'
                  % (path, y, px.hex(), w0))
            return 1
        count += 1
        last = px
        while y < height and rows[y][3 * col:3 * col + 3] == px:
            y += 1
    print('header x=%d y=%d width=%d height=%d rows=%d' % (x0, y0, w0, hh, count))
    return 0


if __name__ == '__main__':
    sys.exit(main())
