locals {
  words   = split(",", "c,a,b,a")
  numbers = range(3)
  doc     = jsondecode("{\"k\": \"v\", \"n\": [1, 2]}")
}

task "f" {
  command = flatten([
    "fn",
    join("-", sort(distinct(local.words))),
    format("%03d", max(1, 7, 3)),
    formatlist("x%s", local.numbers),
    lower("ABC"),
    tostring(length(local.words)),
    jsonencode({ a = 1 }),
    lookup(local.doc, "k", "none"),
    lookup(local.doc, "missing", "none"),
    replace("a-b-c", "-", "_"),
    regex("[0-9]+", "abc123def"),
    trimspace("  t  "),
    chomp("line\n"),
    substr("hello", 1, 3),
    coalesce(null, "first"),
    tostring(contains(local.words, "b")),
    element(local.words, 1),
    join(",", reverse(local.words)),
    join(",", keys(zipmap(["k1", "k2"], [1, 2]))),
    tostring(abs(-2) + ceil(1.2) + floor(1.8) + min(5, 4)),
    try(local.doc.nope, "tried"),
  ])
}
