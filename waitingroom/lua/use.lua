-- A purchase by a seller other than the gate spends its buyer's admission (after
-- spend.lua, which defines admission_spend).
-- KEYS[1] the room   KEYS[2] active   KEYS[3] admitted   KEYS[4] used
-- ARGV[1] the buyer   ARGV[2] the sale its token names   ARGV[3] the purchase's key
return admission_spend(KEYS[1], KEYS[2], KEYS[3], KEYS[4], ARGV[1], ARGV[2], ARGV[3])
