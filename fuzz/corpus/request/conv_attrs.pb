
Conv
xfloat32
wfloat32
pads	[1,1,1,1]
strides[1,1]

group1