"""Operations: what they are (spec), how networks decompose into them (extract), what they cost on paper (features)."""
