"""Backtracking BPE encoder: BPE's exact output without a merge loop.

For each piece, take the longest token that prefixes the rest of the piece; if BPE would not keep
it next to the previous token (``is_valid_pair``), try the next shorter prefix token; if none fits,
pop the previous token and mark the position it started from as a dead end (README, "How it
works", backtracking in 3 steps). Every position is popped at most once, so a piece of n bytes
costs O(n * L) pair checks in the worst case (L = longest token, 128 here; worst input: long runs
that hit many dead ends, e.g. random base64) and about one trie walk per output token on average.
Memory: the output vector plus n/8 bytes of dead-end bits per piece; a piece over 32 bytes of
other than whitespace or a few repeated bytes also holds 4 bytes per byte of it in the output
vector while it is encoded (its token stack, cut back to its tokens after).

Pieces that are themselves a token (90-96% of pieces in English and code) take one probe of the
whole-piece table (VocabView.pieces, one cache line for tokens up to 8 bytes). In texts of 4 KB or
more, other pieces are remembered in a per-call direct-mapped cache (at most 16384 slots, 384 KB),
so a repeated word costs a memcmp and a copy; each call owns its cache, nothing is shared between
threads. Memory per call: the output vector (4 bytes per token) plus that cache, and about 5 KB
of stack per piece (longest matches of pieces up to 32 bytes, the pair memo of longer ones). The
encoder asks the kernel to back the vocab's large tables by huge pages (no extra memory).
"""

# Performance notes. Measured with a side-by-side script like `benches/bench_encode.py --size
# 2000000` (count and encode_ordinary vs tiktoken, cl100k, median of 5 runs, MB/s); the
# 2-core box is shared and noisy (tiktoken itself varied 8-15 MB/s during this work), so compare
# ratios to tiktoken measured in the same run. perf record/annotate for where the time goes.
#   0. Start (whole-piece lookup via bytes_table, trie by hash, pair table split in two arrays):
#      count english 50.9 (3.6x tiktoken), multilingual 18.5 (1.6x), adv_unicode 22 (0.9x).
#      perf: 30% in encode_piece, stalls on bytes_table / token_starts / all_bytes (3-4 cache
#      misses per whole-piece lookup), trie_keys + trie_vals + node_token (3 per trie step).
#   1. Whole-piece table with the first 8 bytes inline (PieceEntry, 16 B, reachable tokens only,
#      multiplicative hash of head + last 8 bytes + length): a hit on a <= 8-byte piece reads one
#      line. count no longer pushes whole pieces. count english 60-65 (5.0x), code 66-71 (6.4x).
#      Kept.
#   2. Trie and pair tables as one 16-byte slot each (TrieEntry: key, child, child's token;
#      PairEntry): one line per trie step / pair probe instead of 2-3. In 1's numbers. Kept.
#      The trie table is sized by its node count (it was sized by total token bytes: 2x larger).
#   3. Per-call cache of non-token pieces (71% of non-token pieces repeat within 2M chars of
#      multilingual, 72% in code, 9% in adv_base64, 3% in adv_unicode): 4096 fixed slots gave
#      multilingual 18 -> 22-25; slots scaled with the text (1 per 64 bytes, 256..16384) gave
#      multilingual count 49.7 (4.0x), english 100 (6.8x), code 103 (8.6x); adv_base64 and
#      adv_unicode unchanged within noise (a miss costs one L2 slot read). Kept. It only pays on
#      long texts: below 4 KB it is off (benches/bench_encode.py "Small inputs" shows both).
#   4. Token lists built from one shared list of int objects (INCREF + store, no PyLong
#      allocation per token): encode english 43.6 -> 62-70 MB/s with 3. Kept.
#   5. first2: direct 64K table for the first two trie steps (one L2 read instead of a
#      root_child + node_token + hash probe), and a 2**21-bit filter in front of pair_lookup
#      (most is_valid_pair probes are misses): adv_unicode (1.1 bytes/token, every step misses)
#      count 20 -> 32.7 (2.0x tiktoken), multilingual 49.7 -> ~41-50 (noise), adv_base64 ~ +0%
#      (its pieces are 1-16 bytes of mixed case that do hit the pair table). Kept.
#   Issue 3 follow-up. Method: paired in-process A/B (a temporary runtime switch, A and B
#   alternating call by call, 15 rounds, thread CPU time, median of per-round ratios; the box
#   ran at load 3-4, where separate-process medians scattered by +-30%), plus callgrind
#   (--cache-sim, 8 MB LL) for instruction and miss counts, o200k adv_base64 200 KB unless said.
#   6. Look-ahead ring in encode_text: pieces are cut AHEAD = 8 in advance and the whole-piece
#      slot of each is prefetched (o200k pieces table is 8 MB: one LL miss per piece that is not
#      hot, 30K of the 92K simulated LL misses); one-byte pieces are byte_token, no hash.
#      Speed-up (CPU time): o200k b64 count 1.25x, cl100k b64 1.18x, o200k english 1.27x. Kept.
#      Depth: AHEAD = 16 vs 8: b64 1.00x, english 1.00x, multilingual 0.97x; AHEAD = 4 vs 8:
#      b64 0.96x, english 0.94x. 8 kept.
#   7. next_match for remaining length <= 8 by probing the whole-piece table for every prefix
#      length at once (independent, prefetched loads instead of the trie's dependent chain):
#      Ir +18% (35.7M -> 42.3M), simulated LL misses equal (92.3K -> 92.7K); speed o200k b64
#      1.02x, cl100k b64 0.69x, o200k adv_unicode 0.77x (the trie walk stops at the first
#      missing child; the probes cannot). Rejected.
#   8. first2x: first2's node and that node's token in one 8-byte word (512 KB), so next_match's
#      first step reads one line instead of first2 then node_token (53K D1 misses at node_token
#      in the 200 KB profile): o200k b64 1.04x, cl100k b64 1.03x, adv_unicode 1.01x,
#      multilingual 1.00x. Kept. With 9: english 1.04x, multilingual 1.03x.
#   9. Prefetch the per-call cache slot of each piece cut ahead (once the cache exists):
#      o200k english 1.04x, multilingual 1.03x, b64 1.03x / cl100k b64 0.97x (noise). Kept.
#  10. backtrack_piece with its dead-end bits on the stack for pieces < 256 bytes and the last
#      token kept in a register instead of out.back(): Ir -5%, speed 0.98-1.02x. Rejected.
#  11. Prefetch, at the start of backtrack_piece, the third trie step of next_match for every
#      position of the piece (independent loads; callgrind puts 35K of 92K simulated LL misses
#      in the trie walk), optionally also the fourth step: 0.99-1.03x. Rejected: on the real
#      machine the trie's hot part stays in L3; the time is mispredicted branches (callgrind
#      --branch-sim: 2.9 per byte of b64, half of them in backtrack_piece) and instructions.
#  12. trie8: the trie in 8-byte slots (key | child with a has-token flag, token read once at the
#      end of the walk; 8 MB instead of 16 MB for o200k, +8 MB resident): o200k b64 1.04x,
#      cl100k b64 1.05x, adv_unicode 1.05x, but multilingual 0.98x, english 0.98x (load 5-6,
#      quartiles +-5%). Rejected: no clear gain for 8 MB more memory.
#  13. lookup_piece_hashed: pieces of 9-16 bytes compared by one 8-byte load of their tails
#      instead of memcmp: Ir 11.50M -> 11.53M (o200k english 200 KB), 18.15M -> 18.18M
#      (multilingual), 10.12M -> 10.18M (cl100k code). Rejected.
#   Bench at 84cafac (benches/bench_encode.py --reps 3, load ~5): o200k count english 4.80x
#   tiktoken, multilingual 3.14x, adv_unicode 1.43x bpe-openai; adv_base64 count 1.27x
#   (cl100k) / 1.11x (o200k) bpe-openai, encode 1.47x / 1.35x the best peer; 'a' * n CPU time
#   per byte flat (1.01 for o200k). Left: the look-ahead ring costs ~43 Ir per piece in
#   encode_text (2.84M -> 4.63M Ir, o200k english 200 KB), paid back by 6 but worth trimming;
#   o200k adv_base64 count is short of 1.3x bpe-openai (callgrind --branch-sim: ~2.9
#   mispredicted branches per byte, half of them in backtrack_piece / is_valid_pair).
#   Issue 3, second follow-up (o200k count short of 5x tiktoken on English/code). Why o200k is
#   slower per byte than cl100k for us: tiktoken gains on o200k, we do not, and our o200k time is
#   memory, not instructions. callgrind, count of 300 KB English: cl100k 15.7M Ir, o200k 17.2M
#   (scanner 8.6M vs 7.2M; encode_text ~7.0M both; backtrack_piece 1.1M both). perf (cpu-clock,
#   o200k English 1 MB): backtrack_piece 35% of the time although it sees only the ~3.5K distinct
#   non-token pieces (29 KB of 1 MB), 56% of its samples on the trie slot load; encode_text 19%,
#   half of it on the whole-piece slot and on token_starts/all_bytes for pieces over 8 bytes.
#   o200k's tables are twice cl100k's (pieces 8 MB, trie 16 MB, pairs 8 MB) and live on 4 KB
#   pages (THP is "madvise" here): most probes are a TLB miss as well as a cache miss.
#   A/B below: separate processes alternating, 7 rounds x median of 5 calls, thread CPU time,
#   median of per-round ratios; load average 6-8 during all of it.
#  14. Huge pages: BacktrackEncoder.__init__ asks for the 2 MB-aligned interior of the pieces,
#      trie and pair tables to be collapsed into transparent huge pages (madvise MADV_HUGEPAGE +
#      MADV_COLLAPSE; no copy kept, RSS unchanged; a no-op where refused). Trial with
#      GLIBC_TUNABLES=glibc.malloc.hugetlb=1: o200k english 1.08x, multilingual 1.08x (5 pairs);
#      the madvise itself: o200k english 1.03-1.13x, code 1.04-1.22x, multilingual 1.06-1.5x,
#      b64 1.00x, cl100k english 0.95x (noise; 6 rounds at load 5.5). Ir unchanged. Kept.
#  15. longest_matches: for pieces of 2..32 bytes, next_match of every position at once, the
#      walks advancing one byte per round (prefetch every live walk's slot, then probe), so the
#      misses of one piece overlap instead of forming one dependent chain per token. Ir +6%
#      (o200k english 300 KB 17.16M -> 18.25M), +26% multilingual (24.9M -> 31.4M): a walk from
#      every byte, not only from token starts. Time: o200k english 1.03x, code 1.04x,
#      multilingual 1.06x, b64 1.15x, cl100k multilingual 1.07x. Kept.
#  16. Pieces over 32 bytes remember is_valid_pair answers in a 256-slot direct-mapped table on
#      the stack: cl100k 'a' * 300K 24.6M -> 14.9M Ir (-39%); b64 51.6M -> 52.8M (+2%),
#      whitespace 122.1M -> 122.4M (+0.3%; with 64 slots +4.5%, too many conflicts). Kept.
#      Amended: clearing the memo's 256 keys per piece cost o200k adv_unicode (many 33-100 byte
#      pieces, no repeated pairs) +22% Ir over e01e2c4 (82.3M -> 100.7M, 200 KB; bench 1.34x ->
#      1.06x bpe-openai); now only pieces over 256 bytes use it: 91.3M, 'a' * n unchanged
#      (14.95M), o200k english 18.28M. An ASCII-only gate on 15 instead: 102.6M, no help.
#  17. The same memo kept for a whole text (encode_text owns it, shared by its long pieces):
#      cl100k adv_whitespace 122.39M -> 122.52M Ir, o200k adv_whitespace 103.4M -> 102.3M (-1%),
#      b64 +1.3% both. Rejected: whitespace pieces rarely ask about the same pair twice.
#  18. Second prefetch stage in the look-ahead ring for pieces over 8 bytes (token_starts of the
#      piece 4 ahead, its bytes in all_bytes 2 ahead, read from its already prefetched slot):
#      Ir +8% (o200k english 300 KB 18.28M -> 19.76M: the two ring checks run for every piece);
#      o200k english 0.96x, code 0.94x, multilingual 0.87x, cl100k english 0.92x. Rejected.
#   14-16 together vs e01e2c4's build (same vocab module): o200k count english 1.22x, code 1.20x,
#   multilingual 1.15x, adv_base64 1.13x, adv_whitespace 1.00x; cl100k adv_repeat_a 1.27x,
#   adv_whitespace 0.99x.
#  19. backtrack_piece split into backtrack_short (15) and backtrack_long (16), so next_match is
#      inlined again on the long path: o200k adv_unicode 91.3M -> 89.8M Ir (200 KB), english
#      18.28M -> 18.17M, cl100k 'a' * n 14.95M -> 14.87M. Kept.
#  20. Where o200k adv_unicode's Ir went (callgrind, count of 200 KB, encode_text inclusive):
#      77% in backtrack_long, 2.1M in the short path, so not 15's walks (short pieces hold 25K of
#      its 711 KB). The memo itself, on its 650 pieces over 256 bytes of CJK (no pair asked twice):
#      without any memo 83.6M (vs 89.8M), but 'a' * n 7.86M -> 14.1M, whitespace 68.6M -> 70.0M.
#      Tried: (a) the memo dropped after 64 misses with fewer hits: 87.9M, whitespace 71.0M (the
#      flag in the loop costs the loop ~5%); (b) one loop as an inline function with a constant
#      use_memo, called by two wrappers: gcc did not inline it, 87.4M; (c) two copies of the loop,
#      backtrack_long without the memo and backtrack_memo for pieces over 256 bytes with at most 8
#      distinct bytes in their first 64 (runs of a letter or of whitespace): 83.0M, but gcc then
#      inlined both into backtrack_piece and left backtrack_short out of line (b64 +1.8%); with
#      the memo check inside backtrack_long instead: everything inlined, 86.1M; (d) = (c) with
#      encode_text calling backtrack_short itself for pieces <= 32 bytes. Kept (d). Ir before ->
#      after, 200 KB, o200k / cl100k: adv_unicode 89.82M -> 83.04M / 90.28M -> 83.18M;
#      adv_whitespace 68.64M -> 68.42M / 84.04M -> 83.72M; adv_repeat_a 7.86M -> 7.81M /
#      8.61M -> 8.56M; adv_base64 37.89M -> 38.13M / 33.07M -> 33.31M (+0.6%, its long pieces lose
#      the memo); english 12.31M -> 12.35M / 11.40M -> 11.44M; code 11.91M -> 11.94M /
#      10.75M -> 10.78M; multilingual 22.86M -> 23.06M / 23.03M -> 23.22M (+0.8%: backtrack_short
#      out of line costs 0.19M more than inlined in backtrack_piece).
#   Left: o200k adv_unicode 83.0M Ir per 200 KB against 82.3M at e01e2c4. Whitespace pieces (cl100k adv_whitespace: 400 Ir per byte, 94% in backtrack_piece, most
#   in is_valid_pair's pair probes of long runs of spaces that are rejected and retried); the
#   two dependent misses (token_starts, all_bytes) of the whole-piece check for pieces over
#   8 bytes (18 did not hide them at a profit; keeping the bytes of 9-16 byte tokens in the
#   whole-piece slot would, but that is a Vocab layout change).
#   Issue 3, third follow-up. Decisions on callgrind Ir of one count() of the first 200,000 bytes
#   of each corpus (--toggle-collect on encode_text, so the UTF-8 conversion is outside until 26),
#   per 200 KB of UTF-8, not per 200K chars as in 14-20; misses from --cache-sim on 1 MB; timed
#   A/B in alternating processes where the load allowed. Start (e452448):
#   o200k english 12.33M, adv_unicode 23.40M, adv_whitespace 67.76M, adv_base64 38.13M, code
#   11.94M, multilingual 19.69M, adv_repeat_a 7.81M; cl100k adv_base64 33.31M, english 11.42M,
#   adv_whitespace 79.79M.
#  21. The token stack of each backtracking loop in plain memory with the last token in a register
#      (10 did this for backtrack_piece as a whole; now the loops are split, and count no longer
#      touches a vector for short pieces): short_tokens on a 32-entry array with the dead-end bits
#      in one word, called directly by count; backtrack_long/backtrack_memo on out's storage.
#      o200k adv_unicode 23.40M -> 21.50M (-8.1%), adv_base64 -6.3%, adv_whitespace -2.8%; cl100k
#      adv_base64 -8.4%, adv_whitespace -2.9%; english -1%; adv_repeat_a +1.3% (memset).
#      backtrack_long grows out by n at once: growing on demand (a check per push) gave back
#      1.2M of adv_unicode's gain (22.69M); backtrack_memo grows on demand (repetitive pieces
#      have 8+ bytes per token; growing by n there cost 'a' * n a memset of 4n bytes). Kept.
#  22. Pieces cut in blocks of BLOCK = 8 by one next_piece_ends call (pretokenize notes, step 8)
#      instead of one cross-module next_piece_end call per piece (~20 Ir of prologue/epilogue
#      each, plus the dispatch on kind); a block is cut, hashed and prefetched while the previous
#      one is encoded (look-ahead 8-16 pieces, like AHEAD = 8-16 in 6), which also drops the
#      ring's per-piece bookkeeping. Ir: o200k english 12.21M -> 11.36M, code 11.83M -> 10.94M,
#      multilingual 19.13M -> 18.42M, adv_base64 35.72M -> 33.80M; cl100k english 11.31M ->
#      10.03M, adv_base64 30.51M -> 28.10M; adv_unicode and adv_whitespace -0.1 to -0.4%. With
#      the ASCII-word paths in front of the scanners (pretokenize note 8): o200k english 9.95M,
#      code 10.26M, multilingual 18.10M, adv_base64 32.60M; cl100k english 9.13M, adv_base64
#      27.95M. Kept.
#  23. mul_hash for the trie and pair tables (vocab.pxd): slot (k * golden >> 32) & mask and the
#      pair filter bit from the same product's top bits, instead of hash_u64's xorshift-multiply-
#      xorshift (adv_whitespace asks is_valid_pair once per byte, 89% of them rejected after ~7
#      pair probes: 1.3M probes per 188 KB of long pieces). Probe lengths on o200k's trie keys
#      (emulated): hits 1.338 -> 1.318, misses 1.897 -> 1.872. Ir: o200k adv_whitespace 65.83M ->
#      60.64M (-7.9%), adv_unicode 21.41M -> 19.94M (-6.9%), adv_base64 32.60M -> 31.78M, english
#      9.95M -> 9.83M, multilingual 18.10M -> 17.33M; cl100k adv_whitespace 77.40M -> 71.38M,
#      adv_base64 27.95M -> 26.73M; adv_repeat_a 7.91M -> 8.26M (+4%, its 'a' chain walks). Kept.
#  24. spine_rejects (vocab.pxd): is_valid_pair walks both tokens' spines in decreasing rank order,
#      so unless it stops earlier its last check is the pair of base tokens at the bottoms against
#      the lowest-ranked non-base token of either spine; a per-token table (SpineEnds, 16 bytes per
#      token: 3.2 MB for o200k) gives those four values, and that one probe rejects the pair at
#      once. On o200k adv_whitespace is_valid_pair is asked 188K times per 188 KB of long pieces,
#      89% rejected, nearly all at that bottom check after ~7 probes (a Python model of the loop).
#      A necessary condition only (0 wrong of 600K pairs per vocab; a test keeps it so). Where:
#      (a) in backtrack_long and backtrack_memo: o200k adv_whitespace 60.64M -> 48.23M, cl100k
#      71.38M -> 55.25M, but adv_unicode 19.94M -> 25.20M (its pairs of bytes pay the probe twice);
#      (b) gated on both tokens being merged ones: adv_unicode 20.85M, whitespace 48.97M / 56.20M;
#      (c) only in backtrack_memo, which now also takes the pieces that start and end with ASCII
#      whitespace (any length over 32): o200k adv_whitespace 48.84M (-19.5%), cl100k 56.43M
#      (-21%), adv_unicode 20.12M (+0.9%), other corpora +-0.1%. Kept (c).
#  25. adv_unicode's time did not follow its Ir (-14% by 24, same MB/s): cache-sim of 1 MB shows
#      2.2 D1 misses per byte, 846K of them on the 256 KB pair filter and 588K on first2x, with
#      1.16 bytes per token (rare CJK falls apart into bytes, so most pairs asked are two single
#      bytes, whose is_valid_pair is one probe with no limit). pair_stays answers those from an
#      8 KB bitmap (VocabView.byte_pair_merge, built from pair_lookup for all 65536 byte pairs)
#      when the token is one byte and last is byte_token of the byte before. Ir o200k adv_unicode
#      20.12M -> 18.35M (-8.8%), D1 misses per 1 MB 2.21M -> 1.76M; adv_base64 +0.5 to +1.1%,
#      others +-0.1%. Kept.
#  26. The UTF-8 of long non-ASCII texts (text_utf8), outside encode_text and so outside 21-25's
#      profiles: callgrind of the whole count() of 1 MB of English (UCS-2: curly quotes) gave
#      74.2M Ir, 22.0M of them converting (a kind test and a branch per character). (a) A str
#      whose UTF-8 CPython already caches (PyCompactUnicodeObject.utf8, filled by any earlier
#      PyUnicode_AsUTF8AndSize: bench_encode.py's peers, given the same str, leave it there and
#      read it for free) is used as is: 51.1M. (b) Otherwise one loop per PEP 393 width, ASCII
#      skipped 8 (Latin-1) or 4 (UCS-2) code units a step: 22.0M -> 8.7M, count 60.9M (-18%).
#      Kept both; tests encode a fresh copy (converted) and the tiktoken-touched str (cached).
#  27. One-byte pieces without their own branch (o200k adv_base64: 43% of pieces, in random
#      order, so `length > 1` in cut_block and `length == 1` in encode_text each mispredict ~44K
#      times per 200 KB; callgrind --branch-sim): (a) every piece hashed and looked up in the
#      whole-piece table: o200k b64 Ir 32.21M -> 34.83M, mispredicted 657K -> 555K; english
#      9.68M -> 10.07M, 145K -> 132K; cl100k b64 26.86M -> 28.65M, 632K -> 619K; (b) only cut_block
#      hashing every piece: o200k b64 33.68M / 600K, cl100k b64 27.83M / 624K. At ~15 cycles a
#      miss and IPC ~2.5 that is -2% for o200k b64 and +2% for cl100k b64. Rejected.
#   Issue 3, fourth follow-up (o200k english count at 4.2-4.9x tiktoken, goal 5x). perf
#   (cpu-clock, o200k english 1 MB): short_tokens 31.6% of the time on 11.6% of the Ir, 37% of
#   its samples on the trie slot load and 22% on the pair filter and pair table; the 3.5K calls
#   per MB are first sights of distinct non-token pieces (avg 8.5 bytes, 2.3 tokens), 45 D1
#   misses each. A/B in one process (a temporary runtime switch, alternating calls, 21-41
#   rounds, thread CPU time, median of per-round ratios); Ir and D1 misses from callgrind of
#   one count() of 1 MB with the str's UTF-8 cached.
#  28. Longest matches from the whole-piece table instead of the trie: (a) every substring of 3+
#      bytes of pieces up to 12 bytes hashed and prefetched at once (one round of misses instead
#      of one per trie level): o200k english 1.03-1.05x, code 1.04x, but multilingual 0.91x
#      (12 bytes) and Ir +11-17% on multilingual and adv_base64; gated on ASCII pieces,
#      multilingual still 0.97x. Rejected. (b) short_tokens_probed: only the positions the
#      backtracking reaches, each probing the lengths 3..rest at once (probe_longest), for ASCII
#      pieces up to 16 bytes: o200k english 1.13x, cl100k english 1.11x, code 1.06x, multilingual
#      1.01x, o200k adv_base64 0.99x, but cl100k adv_base64 0.75x (random letters: short tokens,
#      many positions, every probe of every length). (c) = (b) for pieces shaped like words only
#      (word_shaped: an ASCII character, a letter, then letters of one case; 92% of o200k
#      english's distinct non-token pieces, 32% of cl100k adv_base64's): o200k english
#      1.06-1.11x, cl100k english 1.08-1.09x, o200k code 1.05x, multilingual 1.02x, adv_unicode
#      1.00x, o200k adv_base64 0.99x, cl100k adv_base64 0.96-1.00x. Kept (c). With 29, against
#      10e5879 (Ir / D1 misses per 1 MB): o200k english 45.78M / 287K -> 43.28M / 242K, cl100k
#      english 46.41M / 298K -> 44.04M / 258K, o200k code 51.85M -> 49.90M, multilingual 65.90M
#      -> 62.90M, adv_base64 158.3M -> 165.6M (+4.6%, D1 -3%), cl100k adv_base64 139.5M ->
#      145.6M (+4.4%, D1 equal), adv_unicode equal. short_tokens_probed repeats short_tokens'
#      loop on purpose: one loop with a mask of filled-in positions cost cl100k adv_base64 +1.7%
#      Ir (144.05M -> 146.50M), o200k adv_base64 +0.4%, multilingual +0.4%, English +0.0-0.1%.
#  29. lookup_piece_hashed compares the tail of a 9-16 byte piece by one 8-byte load per side
#      (tail_equal) instead of a memcmp call (perf: memcmp 5.8% of o200k english; 22K of the 28K
#      calls per MB were this check). 13 measured the same change by Ir only: o200k english
#      45.78M -> 44.73M Ir (-2.3%); time 0.997x in 9 alternating process pairs (noise). Kept for
#      the Ir.
#  30. piece_tails: the last 8 bytes of every token over 8 bytes in an array parallel to the
#      whole-piece table (same slot index), prefetched by cut_block with the slot for pieces over
#      8 bytes. perf after 29: 30% of encode_text's own samples sat on the 9-16 byte check's chain
#      token id -> token_starts -> all_bytes (22K such pieces per MB of English, 2.3K distinct);
#      after, that chain is gone from the profile. Time vs aec84fd (9 alternating process pairs,
#      thread CPU time): o200k english 1.01x and 1.04x in two runs, code 0.98x, cl100k english
#      1.06x. Memory: +4 MB (o200k) and +2 MB (cl100k) of table, RSS after loading both 133.0 ->
#      138.1 MB. Kept.
#  31. token_len from a one-byte-per-token array (lengths saturated at 255) instead of two reads
#      of token_starts (perf: ~12% of short_tokens' samples on token_starts): callgrind, 1 MB,
#      o200k english Ir 43.41M -> 43.44M, D1 misses 229K -> 226K; adv_base64 165.3M -> 165.6M,
#      2.84M -> 2.79M; time vs e200f7e 1.015x english, 0.94x and 1.08x adv_base64 in two runs
#      (noise). Rejected: no measurable gain for another table.
#  32. backtrack_long taking its longest matches from windows of 32 positions computed together
#      (longest_matches with the walks bounded by the piece, not the window), for adv_unicode's
#      long pieces at 1.16 bytes per token (perf: 52% of backtrack_piece's samples on next_match's
#      trie slot, one dependent chain per token): o200k adv_unicode 1.02x and 0.96x in two runs,
#      cl100k adv_unicode 0.91x, cl100k adv_base64 0.99x. Rejected.
#   Issue 3, fifth follow-up (o200k adv_unicode count at 1.17-1.55x bpe-openai, goal 1.3x). perf
#   (cpu-clock, count of 1 MB): 52% of backtrack_piece's samples on next_match's trie slot. The
#   rare CJK characters of adv_unicode end most walks at the third byte: of 908K next_match calls
#   per MB, 770K stop at first2x (no two-byte prefix), 121K find a first2 node and then no third
#   byte, 17K go deeper. Those 121K read a trie slot that is empty, a miss into the 16 MB trie.
#   A/B in alternating processes (5-15 pairs, thread CPU time, median of per-pair ratios).
#  33. step3_filter (vocab.pxd, next_match): one bit per trie key whose parent is a first2 node,
#      16+ bits per key (17K keys in cl100k, 24K in o200k: 2**19 bits, 64 KB each, ~4% false
#      positives), asked before the walk's first trie step. o200k adv_unicode 1.26x, cl100k
#      adv_unicode 1.37x, o200k adv_base64 1.07x, multilingual 1.00x, adv_whitespace 0.99x
#      (Ir +0.9%: 261.7M -> 263.9M per MB, its walks go deep and pay the bit). English Ir equal
#      (43.42M). Kept. perf after it, adv_unicode, share of backtrack_piece's samples: first2x
#      12.6%, the filter 5.6%, trie slots 20.3% (walks that pass it), pair filter 8.8%, pair
#      table 14.8%.
#  34. first2_bits: an 8 KB bitmap of the first2 nodes in front of next_match's first2x read
#      (512 KB; adv_unicode asks it at every byte, 85% of them for no node). D1 misses per MB of
#      adv_unicode 1.84M -> 1.34M, Ir +2.3% (94.7M -> 96.9M); time o200k adv_unicode 1.03x,
#      0.96x, 1.05x, cl100k adv_unicode 1.02x, 0.94x (three and two runs). Rejected: first2x's
#      used rows (lead and continuation bytes) stay in L2; no gain above the noise.
#  35. longest_matches asks step3_filter before it starts a walk's trie steps (random base64
#      letters start a walk at every position and most third letters end it): cl100k adv_base64
#      1.23x, o200k adv_base64 1.13x, cl100k multilingual 1.01x, o200k english 1.03x; o200k
#      multilingual 0.95x and 1.04x in two runs (Ir +0.6%, 62.71M -> 63.10M per MB; D1 misses
#      +3.5%: its CJK walks nearly all pass). Kept. perf after it, cl100k adv_base64: the pair
#      filter and pair table in is_valid_pair 23% of short_tokens' samples, the trie 14%.
#      Looked at and left: a per-call memo of is_valid_pair for English (4,505 adjacent pairs in
#      the 3,475 distinct non-token pieces of 1 MB, 4,175 distinct: nothing to reuse); walks
#      from continuation bytes only when reached (multilingual: they end at first2x already,
#      402 trie steps of 225K).
#  36. What is_valid_pair costs o200k English and code `count`: with pair_stays answering True in
#      short_tokens / short_tokens_probed (wrong tokens; a timing bound only, in one process,
#      21 alternating rounds) count is 1.30x (English) and 1.33x (code) faster. A Python replay of
#      the loop on the 3,426 distinct word-shaped non-token pieces of 1 MB of English: 3.3 pair
#      checks per piece (1.6 kept, 4.0 probes each; 1.7 rejected, 2.7 probes each), 11 pair-table
#      probes per piece, one pair-filter read (256 KB) each. Tried: Spines, both spines of every
#      token (up to 4 steps) in one 32-byte record, so the walk reads two records instead of one
#      split_right / split_left load per step (a dependent chain): o200k English 0.93x and 1.00x,
#      code 1.02x, multilingual 0.98x, cl100k adv_base64 0.94x, for +6.4 MB (o200k). Rejected:
#      the chain was not what the walk waits on; the probes' filter reads are (L2 misses, 11.4K
#      per MB of English in a 1 MB-L2 cache simulation, 8.2K more in the pair table).
#  37. Multilingual's pair checks: with pair_stays answering True (timing bound only, as in 36)
#      o200k multilingual count is 1.53x faster, cl100k 1.51x. A Python replay of the loop on the
#      12,141 distinct non-token pieces of 1 MB: 50,239 non-byte pair checks, 31,830 distinct
#      pairs (37% asked before; cl100k adv_base64 42%, English 10%). Tried: (a) a per-call memo of
#      is_valid_pair answers (direct mapped, one 8-byte slot per 64 bytes of text, like the piece
#      cache): o200k multilingual 1.01x, cl100k 1.02x, o200k English 1.04x, cl100k adv_base64
#      0.94x: the pairs asked again are the ones whose tables are still in cache, so the memo
#      saves instructions, not misses, and its own read costs a miss on the first ask; (b) after
#      longest_matches, prefetching the first probe of every pair on the greedy path (pair filter
#      word, split_right of the left token, split_left of the right one): multilingual 0.94x /
#      0.99x, adv_base64 0.99x. Both rejected.
#   Bench after 26 (benches/README.md, "Issue 3, third follow-up"). Left: o200k english is
#   bound by cache misses, not instructions (1 MB: Ir -20% since e452448, D1 misses unchanged at
#   264K, LL 61K, 73% of the LL misses in short_tokens' trie walks over the ~3.3K distinct
#   non-token pieces; time +5% at equal load); o200k adv_unicode likewise (1.76M D1 misses per
#   1 MB: first2x and the trie at every byte of rare CJK); the whole-piece check of pieces over
#   8 bytes (token_starts, all_bytes) as in the paragraph above.
# Not done / rejected:
#   - A byte-pair merge loop (tiktoken's algorithm) on token ids for short pieces: it needs the
#     pair table to hold every adjacent pair whose bytes form a token, which our split-derived
#     table does not guarantee for arbitrary vocabularies; not tried for exactness reasons.
#   - A global or thread-local cache of pieces: per-call is enough to catch repeats in long
#     texts and needs no synchronisation; a read-only table of frequent pieces built at load
#     would need a training corpus. Not tried.
#   - Inlining the scanner into the encode loop (pretokenize is a separate module): the scanner
#     alone runs at 400+ MB/s, ~15% of the time at 60 MB/s; not done within this change.
#   - -march flags: not allowed (wheels must run anywhere).

from cpython cimport array
from cpython.ref cimport PyObject
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy
from libcpp.vector cimport vector

from bpecore._hugepages cimport bpe_huge_pages  # the vocab's random-access tables (Performance notes, step 14)
from bpecore._simd cimport bpe_prefetch
from bpecore._types cimport NO_TOKEN
from bpecore.utf8 cimport NOGIL_UTF8_CHARS, utf8_fill, utf8_offsets, utf8_size
from bpecore._classes cimport PAT_NONE, PAT_REGEX
from bpecore.pretokenize cimport next_piece_end, next_piece_ends
from bpecore.vocab cimport (
    PairEntry, PieceEntry, TrieEntry, Vocab, VocabView, is_valid_pair, hash_u64, load_head, lookup_piece, lookup_piece_hashed,
    bytes_stay_apart, mul_hash, next_match, piece_hash, spine_rejects, step3_passes, token_len,
)

import array as _array

from bpecore.pretokenize import pattern_kind

cdef extern from "Python.h":
    # The UTF-8 a str caches once asked for it (CPython's compact non-ASCII strings); NULL if not yet.
    ctypedef struct PyCompactUnicodeObject:
        Py_ssize_t utf8_length
        char* utf8
    bint PyUnicode_IS_COMPACT(object o)
    PyObject** PySequence_Fast_ITEMS(object o)
    void Py_INCREF_p "Py_INCREF"(PyObject* o)
    void PyList_SET_ITEM_p "PyList_SET_ITEM"(object lst, Py_ssize_t i, PyObject* o)
    object PyList_New(Py_ssize_t n)


cdef Py_ssize_t encode_piece(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                             vector[uint32_t]& out, vector[uint64_t]& bits) noexcept nogil:
    """Append the BPE encoding of p[:n] to out; return how many tokens were appended."""
    if n <= 0:
        return 0
    cdef uint32_t token = lookup_piece(v, p, n)
    if token != NO_TOKEN:
        out.push_back(token)
        return 1
    return backtrack_piece(v, p, n, out, bits)


cdef Py_ssize_t count_piece(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                            vector[uint32_t]& scratch, vector[uint64_t]& bits) noexcept nogil:
    """len(BPE of p[:n]) (n >= 1); ``scratch`` is clobbered."""
    if lookup_piece(v, p, n) != NO_TOKEN:
        return 1
    scratch.clear()
    return backtrack_piece(v, p, n, scratch, bits)


cdef enum:
    SHORT_PIECE = 32    #: pieces up to this many bytes get all their longest matches at once
    PROBE_PIECE = 16    #: ASCII pieces up to this many bytes find them in the whole-piece table
    PAIR_MEMO = 256     #: is_valid_pair answers remembered per longer piece (2**8 slots)
    MEMO_SAMPLE = 64    #: leading bytes of a long piece looked at to decide on the memo
    MEMO_DISTINCT = 8   #: the memo is used when they hold at most this many distinct bytes
    STACK_START = 1024  #: tokens of room a long piece's stack starts with (doubled when full)


cdef void longest_matches(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                          uint32_t* best) noexcept nogil:
    """best[i] = next_match(v, p + i, n - i) for every i < n (2 <= n <= SHORT_PIECE).

    The n trie walks advance together, one byte per round: a round first prefetches the slot of
    every live walk, then probes them, so their cache misses overlap instead of queueing along
    one dependent chain per token (Performance notes, step 15).
    """
    cdef uint32_t node[SHORT_PIECE]
    cdef uint64_t slot[SHORT_PIECE]
    cdef uint8_t live[SHORT_PIECE]
    cdef Py_ssize_t i, d, m = 0, k, j
    cdef uint64_t x, key, h, kk
    cdef uint64_t mask = v.trie_mask
    cdef const TrieEntry* trie = v.trie
    for i in range(n):
        best[i] = v.byte_token[p[i]]
        if i + 1 < n:
            x = v.first2x[(<uint32_t>p[i] << 8) | p[i + 1]]
            if <uint32_t>x != NO_TOKEN:
                if (x >> 32) != NO_TOKEN:
                    best[i] = <uint32_t>(x >> 32)
                if i + 2 < n:
                    if step3_passes(v, mul_hash(((x & <uint64_t>0xFFFFFFFF) + 1) << 8 | p[i + 2])):
                        node[i] = <uint32_t>x
                        live[m] = <uint8_t>i
                        m += 1
    d = 2
    while m:
        for k in range(m):
            i = live[k]
            h = (mul_hash(((<uint64_t>node[i] + 1) << 8) | p[i + d]) >> 32) & mask
            slot[k] = h
            bpe_prefetch(&trie[h])
        j = 0
        for k in range(m):
            i = live[k]
            key = ((<uint64_t>node[i] + 1) << 8) | p[i + d]
            h = slot[k]
            while True:
                kk = trie[h].key
                if kk == key or kk == 0:
                    break
                h = (h + 1) & mask
            if kk == 0:
                continue
            node[i] = trie[h].child
            if trie[h].token != NO_TOKEN:
                best[i] = trie[h].token
            if i + d + 1 < n:
                live[j] = <uint8_t>i
                j += 1
        m = j
        d += 1


cdef Py_ssize_t backtrack_piece(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                                vector[uint32_t]& out, vector[uint64_t]& bits) noexcept nogil:
    """encode_piece without the whole-piece lookup (n >= 1)."""
    if 2 <= n <= SHORT_PIECE:
        return backtrack_short(v, p, n, out)
    if (is_space(p[0]) and is_space(p[n - 1])) or (n > PAIR_MEMO and few_distinct_bytes(p)):
        return backtrack_memo(v, p, n, out, bits)
    return backtrack_long(v, p, n, out, bits)


cdef inline bint is_space(uint8_t c) noexcept nogil:
    """c is an ASCII space, tab, \\n or \\r: a piece that starts and ends with one is a
    whitespace run in the shipped patterns (a choice of loop only; any piece is encoded exactly)."""
    return c == 0x20 or c == 0x09 or c == 0x0A or c == 0x0D


cdef inline bint few_distinct_bytes(const uint8_t* p) noexcept nogil:
    """Whether p[:MEMO_SAMPLE] holds at most MEMO_DISTINCT distinct bytes (runs of a letter or
    of whitespace ask about the same pairs again and again; CJK or base64 text does not)."""
    cdef uint64_t seen[4]
    cdef Py_ssize_t i
    cdef uint32_t distinct = 0
    seen[0] = seen[1] = seen[2] = seen[3] = 0
    for i in range(MEMO_SAMPLE):
        if not (seen[p[i] >> 6] >> (p[i] & 63)) & 1:
            seen[p[i] >> 6] |= <uint64_t>1 << (p[i] & 63)
            distinct += 1
    return distinct <= MEMO_DISTINCT


cdef inline bint pair_stays(const VocabView* v, uint32_t last, uint32_t token, const uint8_t* p,
                            Py_ssize_t pos, Py_ssize_t end) noexcept nogil:
    """is_valid_pair(last, token) for ``last`` ending at p[pos - 1] and ``token`` spelling
    p[pos:end]: a pair of single bytes (most pairs in text that is not in the vocab, e.g. rare CJK)
    is one bit of an 8 KB table instead of a probe of the 256 KB filter (Performance notes, 25)."""
    if end - pos == 1 and last == v.byte_token[p[pos - 1]]:
        return bytes_stay_apart(v, p[pos - 1], p[pos])
    return is_valid_pair(v, last, token)


cdef inline bint word_shaped(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """p[:n] (2 <= n <= 16) looks like a word: an ASCII character, an ASCII letter, then ASCII
    letters all of one case (" word", " Word", "_WORD"; random base64 rarely is)."""
    cdef Py_ssize_t i
    cdef uint32_t case
    if p[0] >= 0x80 or <uint32_t>((p[1] | 0x20) - 0x61) > 25:
        return False
    if n == 2:
        return True
    case = p[2] & 0x20
    for i in range(2, n):
        if <uint32_t>((p[i] | 0x20) - 0x61) > 25 or (p[i] & 0x20) != case:
            return False
    return True


cdef inline uint32_t probe_longest(const VocabView* v, const uint8_t* p, Py_ssize_t r) noexcept nogil:
    """next_match(v, p, r) for 1 <= r <= PROBE_PIECE from the whole-piece table: every length from
    3 to r is hashed and its slot prefetched, then looked up longest first, so the lookups' cache
    misses overlap (one round) where the trie's form a chain (Performance notes, step 28)."""
    cdef uint64_t hs[PROBE_PIECE + 1]
    cdef Py_ssize_t l
    cdef uint64_t x
    cdef uint32_t t
    for l in range(3, r + 1):
        hs[l] = piece_hash(p, l, load_head(p, l))
        bpe_prefetch(&v.pieces[hs[l] >> v.piece_shift])
    for l in range(r, 2, -1):
        t = lookup_piece_hashed(v, p, l, load_head(p, l), hs[l])
        if t != NO_TOKEN:
            return t
    if r >= 2:
        x = v.first2x[(<uint32_t>p[0] << 8) | p[1]]
        if <uint32_t>x != NO_TOKEN and (x >> 32) != NO_TOKEN:
            return <uint32_t>(x >> 32)
    return v.byte_token[p[0]]


cdef Py_ssize_t short_tokens_probed(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                                    uint32_t* stack) noexcept nogil:
    """short_tokens for 2 <= n <= PROBE_PIECE, with the longest match of a position found when the
    loop first reaches it (probe_longest), not for every position beforehand."""
    cdef Py_ssize_t pos = 0, k = 0
    cdef Py_ssize_t end
    cdef uint32_t last = NO_TOKEN, shorter, token
    cdef uint64_t alive = <uint64_t>0xFFFFFFFFFFFFFFFFULL
    cdef uint64_t known = 0
    cdef uint32_t best[PROBE_PIECE]
    token = probe_longest(v, p, n)
    while True:
        end = pos + token_len(v, token)
        if ((alive >> end) & 1) and (last == NO_TOKEN or pair_stays(v, last, token, p, pos, end)):
            stack[k] = token
            k += 1
            last = token
            pos = end
            if pos == n:
                return k
            if not ((known >> pos) & 1):
                best[pos] = probe_longest(v, p + pos, n - pos)
                known |= <uint64_t>1 << pos
            token = best[pos]
        else:
            shorter = v.next_prefix[token]
            if shorter != NO_TOKEN:
                token = shorter
            else:
                alive &= ~(<uint64_t>1 << pos)
                k -= 1
                token = last
                pos -= token_len(v, token)
                last = stack[k - 1] if k else NO_TOKEN


cdef Py_ssize_t short_tokens(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                             uint32_t* stack) noexcept nogil:
    """BPE of p[:n] (2 <= n <= SHORT_PIECE, not itself a token or not) into stack[:k]; returns k.

    Longest matches of all positions first (longest_matches); the token stack, the last token and
    the dead-end bits (one word: bit i clear = position i is a dead end) stay in registers and
    on the stack instead of in vectors (Performance notes, step 21).
    """
    cdef Py_ssize_t pos = 0, k = 0
    cdef Py_ssize_t end
    cdef uint32_t last = NO_TOKEN, shorter, token
    cdef uint64_t alive = <uint64_t>0xFFFFFFFFFFFFFFFFULL
    cdef uint32_t best[SHORT_PIECE]
    if n <= PROBE_PIECE and word_shaped(p, n):
        return short_tokens_probed(v, p, n, stack)
    longest_matches(v, p, n, best)
    token = best[0]
    while True:
        end = pos + token_len(v, token)
        if ((alive >> end) & 1) and (last == NO_TOKEN or pair_stays(v, last, token, p, pos, end)):
            stack[k] = token
            k += 1
            last = token
            pos = end
            if pos == n:
                return k
            token = best[pos]
        else:
            shorter = v.next_prefix[token]
            if shorter != NO_TOKEN:
                token = shorter
            else:
                alive &= ~(<uint64_t>1 << pos)
                k -= 1
                token = last
                pos -= token_len(v, token)
                last = stack[k - 1] if k else NO_TOKEN


cdef Py_ssize_t backtrack_short(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                                vector[uint32_t]& out) noexcept nogil:
    """backtrack_piece for 2 <= n <= SHORT_PIECE (short_tokens, appended to out)."""
    cdef uint32_t stack[SHORT_PIECE]
    cdef Py_ssize_t k = short_tokens(v, p, n, stack), i
    for i in range(k):
        out.push_back(stack[i])
    return k


cdef Py_ssize_t grow_stack(vector[uint32_t]& out, size_t start, Py_ssize_t cap, Py_ssize_t n) noexcept nogil:
    """Make room for twice ``cap`` tokens (at most n) after out[:start]; returns the new room."""
    cap = 2 * cap if 2 * cap < n else n
    out.resize(start + cap)
    return cap


cdef inline bint long_pair_rejected(const VocabView* v, uint32_t last, uint32_t token,
                                   Py_ssize_t token_bytes) noexcept nogil:
    """spine_rejects(last, token) when both are merged tokens (their walk in is_valid_pair is 3+
    steps); False otherwise, where that check would only repeat the walk's first probe."""
    return token_bytes > 1 and v.split_right[last] != last and spine_rejects(v, last, token)


cdef Py_ssize_t backtrack_long(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                               vector[uint32_t]& out, vector[uint64_t]& bits) noexcept nogil:
    """backtrack_piece for n == 1 or n > SHORT_PIECE, without the pair memo.

    The token stack lives in out's storage, grown once by n (a piece of n bytes has at most n
    tokens; growing on demand cost 5% Ir here) and cut back to the tokens at the end; the last
    token stays in a register (Performance notes, step 21)."""
    cdef size_t start = out.size()
    cdef Py_ssize_t pos = 0, k = 0
    cdef Py_ssize_t end
    cdef uint32_t last = NO_TOKEN, shorter
    cdef uint32_t token
    cdef uint32_t* stack
    cdef uint64_t* alive
    bits.assign((n >> 6) + 1, <uint64_t>0xFFFFFFFFFFFFFFFFULL)
    alive = bits.data()
    out.resize(start + n)
    stack = out.data() + start
    token = next_match(v, p, n)
    while True:
        end = pos + token_len(v, token)
        if ((alive[end >> 6] >> (end & 63)) & 1) and (last == NO_TOKEN or pair_stays(v, last, token, p, pos, end)):
            stack[k] = token
            k += 1
            last = token
            pos = end
            if pos == n:
                break
            token = next_match(v, p + pos, n - pos)
        else:
            shorter = v.next_prefix[token]
            if shorter != NO_TOKEN:
                token = shorter
            else:
                alive[pos >> 6] &= ~(<uint64_t>1 << (pos & 63))
                k -= 1
                token = last
                pos -= token_len(v, token)
                last = stack[k - 1] if k else NO_TOKEN
    out.resize(start + k)
    return k


cdef Py_ssize_t backtrack_memo(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                               vector[uint32_t]& out, vector[uint64_t]& bits) noexcept nogil:
    """backtrack_long with is_valid_pair answers remembered (repetitive pieces over PAIR_MEMO
    bytes, which ask about the same pairs again and again). A copy of backtrack_long's loop, not
    a flag in it: the flag cost pieces without the memo 4-5% Ir (Performance notes, step 20)."""
    cdef size_t start = out.size()
    cdef Py_ssize_t pos = 0, k = 0
    cdef Py_ssize_t end
    cdef uint32_t last = NO_TOKEN, shorter
    cdef uint32_t token
    cdef uint32_t* stack
    cdef Py_ssize_t cap
    cdef uint64_t* alive
    cdef uint64_t memo_key[PAIR_MEMO]
    cdef uint8_t memo_ok[PAIR_MEMO]
    cdef uint64_t pk
    cdef uint32_t mi
    cdef bint ok
    bits.assign((n >> 6) + 1, <uint64_t>0xFFFFFFFFFFFFFFFFULL)
    alive = bits.data()
    cap = n if n < STACK_START else STACK_START
    out.resize(start + cap)
    stack = out.data() + start
    for mi in range(PAIR_MEMO):
        memo_key[mi] = <uint64_t>0xFFFFFFFFFFFFFFFFULL   # (NO_TOKEN, NO_TOKEN): never asked
    token = next_match(v, p, n)
    while True:
        end = pos + token_len(v, token)
        if not ((alive[end >> 6] >> (end & 63)) & 1):
            ok = False
        elif last == NO_TOKEN:
            ok = True
        else:
            pk = (<uint64_t>last << 32) | token
            mi = <uint32_t>(hash_u64(pk) >> 56)
            if memo_key[mi] == pk:
                ok = memo_ok[mi]
            else:
                ok = not long_pair_rejected(v, last, token, end - pos) and is_valid_pair(v, last, token)
                memo_key[mi] = pk
                memo_ok[mi] = ok
        if ok:
            if k == cap:
                cap = grow_stack(out, start, cap, n)
                stack = out.data() + start
            stack[k] = token
            k += 1
            last = token
            pos = end
            if pos == n:
                break
            token = next_match(v, p + pos, n - pos)
        else:
            shorter = v.next_prefix[token]
            if shorter != NO_TOKEN:
                token = shorter
            else:
                alive[pos >> 6] &= ~(<uint64_t>1 << (pos & 63))
                k -= 1
                token = last
                pos -= token_len(v, token)
                last = stack[k - 1] if k else NO_TOKEN
    out.resize(start + k)
    return k


cdef struct CacheSlot:
    uint64_t hash       #: piece_hash of the piece
    uint32_t start      #: byte offset of an earlier occurrence in the text
    uint32_t len        #: its length (0 = empty slot)
    uint32_t first      #: index in ``out`` of its first token (encode)
    uint32_t ntok       #: its token count


cdef enum:
    CACHE_MAX_BITS = 14     #: at most 16384 slots x 24 bytes = 384 KB
    CACHE_MIN_TEXT = 4096   #: texts shorter than this do not use the cache



cdef struct Pending:
    # A piece cut ahead of the one being encoded (encode_text's look-ahead blocks).
    Py_ssize_t start            #: byte offset in the text
    Py_ssize_t end              #: end offset
    uint64_t head               #: load_head of the piece (pieces of 2+ bytes)
    uint64_t h                  #: piece_hash of the piece (pieces of 2+ bytes)


cdef enum:
    BLOCK = 8                   #: pieces cut (and their whole-piece slot prefetched) per block


cdef inline Py_ssize_t cut_block(const VocabView* v, int kind, const uint8_t* s, Py_ssize_t n,
                                 const vector[Py_ssize_t]& ends, size_t* e, Py_ssize_t* scan,
                                 Pending* block, const CacheSlot* cache, int cache_bits) noexcept nogil:
    """Cut up to BLOCK pieces from scan[0] (advanced past them) into ``block``, hash the ones of
    2+ bytes and prefetch their whole-piece slot (and their cache slot once ``cache`` exists);
    returns how many were cut, 0 at the end of the text."""
    cdef Py_ssize_t cut[BLOCK]
    cdef Py_ssize_t m = 0, j, start = scan[0], end, length
    cdef size_t n_ends
    if kind == PAT_REGEX:
        n_ends = ends.size()
        while m < BLOCK and e[0] < n_ends:
            end = ends[e[0]]
            e[0] += 1
            if end > (cut[m - 1] if m else start):
                cut[m] = end
                m += 1
    else:
        m = next_piece_ends(kind, s, n, start, cut, BLOCK)
    for j in range(m):
        end = cut[j]
        block[j].start = start
        block[j].end = end
        length = end - start
        if length > 1:
            block[j].head = load_head(s + start, length)
            block[j].h = piece_hash(s + start, length, block[j].head)
            bpe_prefetch(&v.pieces[block[j].h >> v.piece_shift])
            if length > 8:
                bpe_prefetch(&v.piece_tails[block[j].h >> v.piece_shift])
            if cache != NULL:
                bpe_prefetch(&cache[block[j].h >> (64 - cache_bits)])
        start = end
    scan[0] = start
    return m


cdef Py_ssize_t encode_text(const VocabView* v, int kind, const uint8_t* s, Py_ssize_t n,
                            const vector[Py_ssize_t]& ends, vector[uint32_t]& out,
                            bint count_only) noexcept nogil:
    """Encode (append to ``out``) or count the UTF-8 text s[:n]; returns its token count.

    Pieces come from the scanner ``kind`` (BLOCK ends per call), or are cut at ``ends`` for
    PAT_REGEX. They are cut one block ahead and the whole-piece slot of each is prefetched, so the
    table's cache misses overlap instead of queueing one per piece. A one-byte piece is
    ``byte_token``; a piece that is a token costs one probe of the whole-piece table. Other pieces
    go through backtrack_piece, and in texts of CACHE_MIN_TEXT bytes or more they are remembered in
    a direct-mapped cache local to this call (key: the piece's bytes, found again by memcmp against
    the text), so a repeated word is copied instead of encoded again. With ``count_only``, ``out``
    is scratch space.
    """
    cdef vector[uint64_t] bits
    cdef vector[CacheSlot] cache
    cdef CacheSlot* slot = NULL
    cdef bint use_cache = (n >= CACHE_MIN_TEXT) & (n < <Py_ssize_t>0xFFFFFFFFU)
    cdef Py_ssize_t pos, end, length, total = 0, k, ntok, scan = 0, i, cur_n, next_n
    cdef size_t e = 0
    cdef uint64_t h
    cdef uint32_t token, first
    cdef const uint8_t* p
    cdef Pending ring[2 * BLOCK]
    cdef Pending* cur = ring
    cdef Pending* nxt = ring + BLOCK
    cdef Pending* q
    cdef uint32_t stack[SHORT_PIECE]
    cdef int cache_bits = 8   # one slot per 64 bytes of text, 256 to 2**CACHE_MAX_BITS slots
    while cache_bits < CACHE_MAX_BITS and (n >> (cache_bits + 6)) > 0:
        cache_bits += 1
    cur_n = cut_block(v, kind, s, n, ends, &e, &scan, cur, NULL, cache_bits)
    while cur_n:
        next_n = cut_block(v, kind, s, n, ends, &e, &scan, nxt,
                           cache.data() if cache.size() else NULL, cache_bits)
        for i in range(cur_n):
            q = &cur[i]
            pos = q.start
            end = q.end
            p = s + pos
            length = end - pos
            if length == 1:
                if count_only:
                    total += 1
                else:
                    out.push_back(v.byte_token[p[0]])
                continue
            h = q.h
            token = lookup_piece_hashed(v, p, length, q.head, h)
            if token != NO_TOKEN:
                if count_only:
                    total += 1
                else:
                    out.push_back(token)
                continue
            if use_cache:
                if cache.size() == 0:
                    cache.resize(1 << cache_bits)
                slot = &cache[h >> (64 - cache_bits)]
                if slot.len == <uint32_t>length and slot.hash == h and memcmp(s + slot.start, p, length) == 0:
                    if count_only:
                        total += slot.ntok
                    else:
                        first = slot.first
                        for k in range(slot.ntok):
                            token = out[first + k]
                            out.push_back(token)
                    continue
            if length <= SHORT_PIECE:   # not via backtrack_piece: gcc then inlines both loops there
                if count_only:
                    ntok = short_tokens(v, p, length, stack)
                else:
                    ntok = backtrack_short(v, p, length, out)
            else:
                if count_only:
                    out.clear()
                ntok = backtrack_piece(v, p, length, out, bits)
            if count_only:
                total += ntok
            if use_cache:
                slot.hash = h
                slot.start = <uint32_t>pos
                slot.len = <uint32_t>length
                slot.first = <uint32_t>(out.size() - ntok)
                slot.ntok = <uint32_t>ntok
        q = cur
        cur = nxt
        nxt = q
        cur_n = next_n
    return total if count_only else <Py_ssize_t>out.size()


cdef list _INTS = []   #: _INTS[i] is the int i: token lists are built from shared objects


cdef list ids_to_list(const uint32_t* ids, Py_ssize_t k, const uint32_t* id_map, uint32_t max_id):
    """[id_map[ids[i]] (or ids[i] when id_map is NULL) for i < k], items taken from _INTS."""
    cdef Py_ssize_t i
    if <Py_ssize_t>len(_INTS) <= max_id:
        _INTS.extend(range(len(_INTS), max_id + 1))
    cdef PyObject** ints = PySequence_Fast_ITEMS(_INTS)
    cdef PyObject* o
    cdef list result = PyList_New(k)
    for i in range(k):
        o = ints[id_map[ids[i]] if id_map != NULL else ids[i]]
        Py_INCREF_p(o)
        PyList_SET_ITEM_p(result, i, o)
    return result


cdef array.array _UINT32 = _array.array("I")


cdef int text_utf8(BacktrackEncoder enc, str text, const uint8_t** s, Py_ssize_t* n,
                   vector[Py_ssize_t]& ends, vector[uint8_t]& buf) except -1:
    """``enc._pieces(text, s, n, ends)``, but a long non-ASCII text (hand-written scanners only) is
    turned into UTF-8 in ``buf`` with the GIL released; the str is immutable and the caller holds
    it. Lone surrogates raise UnicodeEncodeError, as PyUnicode_AsUTF8AndSize does."""
    cdef Py_ssize_t m = PyUnicode_GET_LENGTH(text), size
    cdef unsigned int kind
    cdef const void* data
    cdef PyCompactUnicodeObject* cached
    if enc.kind == PAT_REGEX or m < NOGIL_UTF8_CHARS or text.isascii():
        return enc._pieces(text, s, n, ends)
    if PyUnicode_IS_COMPACT(text):
        cached = <PyCompactUnicodeObject*><PyObject*>text
        if cached.utf8 != NULL:   # already converted (by an earlier call elsewhere): use it
            s[0] = <const uint8_t*>cached.utf8
            n[0] = cached.utf8_length
            return 0
    kind = PyUnicode_KIND(text)
    data = PyUnicode_DATA(text)
    with nogil:
        size = utf8_size(kind, data, m)
        if size >= 0:
            buf.resize(size)
            utf8_fill(kind, data, m, buf.data())
    if size < 0:
        raise UnicodeEncodeError("utf-8", text, 0, m, "surrogates not allowed")
    s[0] = buf.data()
    n[0] = size
    return 0


cdef class BacktrackEncoder:
    """Pre-tokenizer + backtracking BPE over one Vocab; every method releases the GIL while it encodes.

    ``kind`` says who cuts pieces: a hand-written scanner (pretokenize.pyx), the `regex` module
    (``_regex``, for any other pattern), or nobody (``pattern is None``: one piece).
    Returned ids are external ids (the ranks of ``mergeable_ranks``). Nothing is mutated while
    encoding: any number of threads may use one encoder at once.
    """

    def __init__(self, Vocab vocab, pattern):
        import regex
        if _UINT32.itemsize != 4:
            raise RuntimeError("array('I') is not 32-bit on this platform")
        self.vocab = vocab
        self.pattern = pattern
        self.kind = pattern_kind(pattern)
        self._regex = regex.compile(pattern) if pattern is not None else None
        cdef const VocabView* v = &vocab.view
        with nogil:
            # The whole-piece, trie and pair tables are read at random (4-16 MB for o200k): on
            # 4 KB pages nearly every probe is also a TLB miss. Read-only from here on.
            if v.pieces != NULL:
                bpe_huge_pages(v.pieces, sizeof(PieceEntry) << (64 - v.piece_shift))
                bpe_huge_pages(v.piece_tails, sizeof(uint64_t) << (64 - v.piece_shift))
            if v.trie != NULL:
                bpe_huge_pages(v.trie, sizeof(TrieEntry) * (v.trie_mask + 1))
            if v.pairs != NULL:
                bpe_huge_pages(v.pairs, sizeof(PairEntry) * (v.pair_mask + 1))

    cdef int _pieces(self, str text, const uint8_t** s, Py_ssize_t* n, vector[Py_ssize_t]& ends) except -1:
        """UTF-8 of ``text`` in s/n; for PAT_REGEX also the byte ends of its pieces in ``ends``."""
        s[0] = <const uint8_t*>PyUnicode_AsUTF8AndSize(text, n)
        if self.kind == PAT_REGEX:
            for m in self._regex.finditer(text):
                ends.push_back(m.end())
            if not text.isascii():
                utf8_offsets(s[0], n[0], ends)
        return 0

    cdef Py_ssize_t _encode_pieces(self, const uint8_t* s, Py_ssize_t n, vector[Py_ssize_t]& ends,
                                   vector[uint32_t]& out, bint count_only) noexcept nogil:
        return encode_text(&self.vocab.view, self.kind, s, n, ends, out, count_only)

    cdef list _to_list(self, vector[uint32_t]& out):
        return ids_to_list(out.data(), out.size(),
                           self.vocab.ids.data() if self.vocab.ids.size() else NULL, self.vocab.max_id)

    def encode(self, str text):
        """Token ids of ``text`` (no special tokens). Raises UnicodeEncodeError on lone surrogates."""
        cdef const uint8_t* s
        cdef Py_ssize_t n
        cdef vector[Py_ssize_t] ends
        cdef vector[uint32_t] out
        cdef vector[uint8_t] buf
        text_utf8(self, text, &s, &n, ends, buf)
        with nogil:
            out.reserve(n // 3 + 16)
            encode_text(&self.vocab.view, self.kind, s, n, ends, out, False)
        return self._to_list(out)

    def encode_to_buffer(self, str text):
        """Token ids of ``text`` as an ``array.array("I")`` (one buffer, no int objects)."""
        cdef const uint8_t* s
        cdef Py_ssize_t n, k
        cdef vector[Py_ssize_t] ends
        cdef vector[uint32_t] out
        cdef const uint32_t* id_map = self.vocab.ids.data() if self.vocab.ids.size() else NULL
        cdef vector[uint8_t] buf
        text_utf8(self, text, &s, &n, ends, buf)
        with nogil:
            out.reserve(n // 3 + 16)
            encode_text(&self.vocab.view, self.kind, s, n, ends, out, False)
            if id_map != NULL:
                for k in range(<Py_ssize_t>out.size()):
                    out[k] = id_map[out[k]]
        cdef array.array result = array.clone(_UINT32, out.size(), False)
        if out.size():
            memcpy(result.data.as_uints, out.data(), out.size() * 4)
        return result

    def count(self, str text):
        """len(encode(text)), without building Python objects per token."""
        cdef const uint8_t* s
        cdef Py_ssize_t n, total
        cdef vector[Py_ssize_t] ends
        cdef vector[uint32_t] scratch
        cdef vector[uint8_t] buf
        text_utf8(self, text, &s, &n, ends, buf)
        with nogil:
            total = encode_text(&self.vocab.view, self.kind, s, n, ends, scratch, True)
        return total

    def count_till_limit(self, str text, Py_ssize_t limit):
        """The count of ``text`` if it is <= limit, else None; work grows with ``limit``.

        Pieces are encoded in order and the scan stops as soon as the total passes ``limit``; a piece
        too long to fit (more than limit * L bytes, L the longest token) is rejected unencoded.
        """
        if limit < 0:
            return None
        cdef const uint8_t* s
        cdef Py_ssize_t n, pos = 0, e, total = 0, k
        cdef const VocabView* v = &self.vocab.view
        cdef Py_ssize_t maxlen = self.vocab.max_token_len
        cdef vector[uint32_t] out
        cdef vector[uint64_t] bits
        cdef int kind = self.kind
        s = <const uint8_t*>PyUnicode_AsUTF8AndSize(text, &n)
        if kind == PAT_REGEX:
            for m in self._regex.finditer(text):
                start, stop = m.span()
                piece = text[start:stop].encode("utf-8")
                if total + (len(piece) + maxlen - 1) // maxlen > limit:
                    return None
                total += count_bytes(v, <const uint8_t*>piece, len(piece), out, bits)
                if total > limit:
                    return None
            return total
        with nogil:
            while pos < n:
                e = n if kind == PAT_NONE else next_piece_end(kind, s, n, pos)
                if total + (e - pos + maxlen - 1) // maxlen > limit:
                    total = limit + 1
                    break
                total += count_bytes(v, s + pos, e - pos, out, bits)
                if total > limit:
                    break
                pos = e
        return None if total > limit else total

    def encode_single_piece(self, const uint8_t[::1] data):
        """BPE of ``data`` as one piece (no pre-tokenization)."""
        cdef vector[uint32_t] out
        cdef vector[uint64_t] bits
        if data.shape[0]:
            with nogil:
                encode_piece(&self.vocab.view, &data[0], data.shape[0], out, bits)
        return self._to_list(out)
