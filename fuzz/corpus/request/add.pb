
Add
afloat32
bfloat32 